"""``ga2 decode-table``: the chapter's section-3 table (cycles, traffic, roofline) from a simulator's counters,
in order, decoupled, or both side by side against the memory bound (1 word per cycle: a step's words)."""

import sys

from ga2_sw.analyses.common import finish_plot, json_option, plot_option, progress_bar, table, write_json
from ga2_sw.cycles import DecoupledTimer, InorderTimer, lane_of
from ga2_sw.isa import LANES
from ga2_sw.config import Config
from ga2_sw.options import SEED, Int, IntList
from ga2_sw.dram import GRADES, peak_bytes_per_cycle
from ga2_sw.numerics import KEY_DIGITS
from ga2_sw.packing import beat_bytes, packed
from ga2_sw.workloads import decode_table_programs
from sim.decode_table import decode_table, table_runs

__all__ = ["register"]

# What --lengths takes before the configuration narrows it (_check): a batch of up to the largest array's rows.
LENGTHS = IntList(1, Config.field_range("max_ctx")[1], max_items=Config.field_range("rows")[1])

def _print(rows, config, sim, seconds):
    peak = config.rows * config.cols
    body = []
    for r in rows:
        intensity = r["macs"] / r["beats"]
        achieved = r["macs"] / r["cycles"]
        ceiling = min(peak, intensity)               # memory moves 1 beat per cycle
        overlap = (f"{r['cycles'] / max(r['dma_cycles'], r['cycles'] - r['dma_cycles']):.2f}x"
                   if not config.decoupled else "--")
        body.append([r["name"], r["cycles"], f"{r['cycles'] / r['batch']:,.0f}", r["macs"],
                     *([r["words"], r["beats"]] if packed(config) else [r["words"]]),
                     f"{intensity:.2f}", f"{achieved:.3f}", f"{ceiling:.2f}", f"{100 * achieved / ceiling:.1f}%",
                     f"{100 * r['beats'] / r['cycles']:.1f}%", overlap,
                     "--" if r["chapter_cycles"] is None else f"{r['chapter_cycles']:,}",
                     "yes" if r["matches_reference"] else "NO"])
    unit = "beat" if packed(config) else "word"
    port = f"{config.bus_bytes} bytes per beat" if packed(config) else "1 word"
    print(f"decode steps on {sim} ({config.rows}x{config.cols} array, peak {peak} MAC/cycle, "
          f"memory {port}/cycle, {config.mode.value} mode)")
    moved = ["bytes", "beats"] if packed(config) else ["words"]
    print(table(["program", "cycles", "per token", "MACs", *moved, f"MAC/{unit}", "achieved", "ceiling",
                 "of ceiling", "of mem bound", "if overlapped", "chapter", "= model"], body,
                ["<"] + [">"] * (11 + len(moved))))
    total = sum(r["cycles"] for r in rows)
    words = sum(r["words"] for r in rows)
    beats = sum(r["beats"] for r in rows)
    chapter = [r["chapter_cycles"] for r in rows]
    line = (f"total {total:,} cycles for {words:,} words moved ({100 * words / total:.1f}% of the memory bound)"
            if not packed(config) else f"total {total:,} cycles for {words:,} bytes in {beats:,} beats "
            f"({100 * beats / total:.1f}% of the memory bound, a beat per cycle)")
    if all(chapter):
        line += f"; the chapter's chip: {sum(chapter):,} cycles ({sum(chapter) / total:.2f}x slower)"
    print(line)
    print(f"('achieved' = MACs / cycles; 'ceiling' = min(peak, MAC/{unit} x 1 {unit}/cycle); 'of mem bound' = "
          f"{unit}s / cycles; 'if overlapped' = cycles / max(DMA, non-DMA): the gain if loads ran under compute)")
    if config.memory != "ideal":
        peak = peak_bytes_per_cycle(GRADES[config.memory], config.clock_mhz)
        print(f"behind the AXI4 port: {config.memory} (one x16 device, ga2_sw/dram.py) at a {config.clock_mhz} MHz "
              f"chip clock, peak {peak:.1f} bytes per chip cycle")
        print(table(["program", "cycles", "stall cycles", "bytes on the bus", "of DRAM peak"],
                    [[r["name"], f"{r['cycles']:,}", f"{r['stall_cycles']:,}", f"{r['beats'] * beat_bytes(config):,}",
                      f"{100 * r['dram_bandwidth_fraction']:.1f}%"] for r in rows], ["<"] + [">"] * 4))
        print("('stall cycles': the DMA's busy cycles beyond the ideal memory's, the chip's stall counter)")
    elif config.axi:
        print(f"memory: the ideal AXI4 subordinate; stall cycles {sum(r['stall_cycles'] for r in rows):,}")
    cps = total / seconds if seconds > 0 else float("inf")
    print(f"{sim}: {total:,} cycles simulated in {seconds:.2f} s of wall time, building and loading included "
          f"({cps:,.0f} cycles/s; `ga2 bench-sim` measures the simulation alone)", file=sys.stderr)


def _print_side_by_side(by_mode):
    """One line per program: both modes' cycles against the step's memory bound."""
    inorder, decoupled = by_mode["inorder"], by_mode["decoupled"]
    body = []
    for a, b in zip(inorder, decoupled):
        body.append([a["name"], a["words"], f"{a['cycles']:,}", f"{100 * a['words'] / a['cycles']:.1f}%",
                     f"{b['cycles']:,}", f"{100 * b['words'] / b['cycles']:.1f}%", f"{b['cycles'] / b['words']:.3f}",
                     f"{a['cycles'] / b['cycles']:.2f}x",
                     "--" if a["chapter_cycles"] is None else f"{a['chapter_cycles'] / b['cycles']:.2f}x"])
    ti, td = sum(r["cycles"] for r in inorder), sum(r["cycles"] for r in decoupled)
    tw = sum(r["words"] for r in inorder)
    chapter = [r["chapter_cycles"] for r in inorder]
    body.append(["total", tw, f"{ti:,}", f"{100 * tw / ti:.1f}%", f"{td:,}", f"{100 * tw / td:.1f}%",
                 f"{td / tw:.3f}", f"{ti / td:.2f}x", f"{sum(chapter) / td:.2f}x" if all(chapter) else "--"])
    print("in order against decoupled (memory bound = words moved: the memory moves 1 word per cycle)")
    print(table(["program", "bound", "in order", "of bound", "decoupled", "of bound", "x bound", "speed-up",
                 "vs chapter"], body, ["<"] + [">"] * 8))


def plot_modes(path, by_mode, config, seed=4242):
    """Left: each program's cycles in each mode against its memory bound. Right: the two lanes of the
    decoupled B = 1 step over time (what runs beside what)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (bars, lanes) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [1, 1.5]})
    names = [r["name"].split(" (")[0] for r in next(iter(by_mode.values()))]
    width = 0.8 / (len(by_mode) + 1)
    words = [r["words"] for r in next(iter(by_mode.values()))]
    bars.bar([i for i in range(len(names))], words, width, label="memory bound (words)", color="0.6")
    for n, (mode, rows) in enumerate(by_mode.items(), start=1):
        bars.bar([i + n * width for i in range(len(names))], [r["cycles"] for r in rows], width, label=mode)
    bars.set_xticks([i + width * len(by_mode) / 2 for i in range(len(names))], names)
    bars.set_ylabel("cycles")
    bars.set_title("decode steps: cycles against the memory bound")
    bars.legend()

    cfg = config.replace(mode="decoupled")
    ragged = decode_table_programs(cfg, seed)[-1]
    draw_lanes(lanes, ragged.program, cfg)
    lanes.set_title(f"decoupled {ragged.name.split(' (')[0]} step {ragged.lengths}: three lanes side by side")
    finish_plot(fig, path)


LANE_COLOURS = {"LD": "tab:blue", "ST": "tab:cyan", "MM": "tab:orange", "RQ": "tab:green", "SM": "tab:red"}


def draw_lanes(ax, program, config):
    """``program``'s instructions on ``ax`` as bars over cycles, one row per lane, from the cycle model (an
    MM's end as re-timed beside the vector lane; in order the lanes take turns)."""
    timer = DecoupledTimer(config) if config.decoupled else InorderTimer(config)
    for instr in program:
        if instr.op.name != "HALT":
            timer.issue(instr)
    rows = {lane: n for n, lane in enumerate(reversed(LANES))}
    for instr, start, end in timer.starts:
        ax.broken_barh([(start + 1, end - start)], (rows[lane_of(instr.op)] - 0.35, 0.7),
                       facecolors=LANE_COLOURS[instr.op.name], edgecolor="white", linewidth=0.5)
    for op, colour in LANE_COLOURS.items():
        ax.bar(0, 0, color=colour, label=op)
    ax.set_yticks(list(rows.values()), [f"{lane} lane" for lane in rows])
    ax.set_ylim(-0.6, len(LANES) + 0.9)
    ax.set_xlabel("cycle")
    ax.legend(ncol=5, loc="upper left", fontsize="small")


def _run(args):
    from sim.backends import get_backend
    config = table_config(args)
    sim = args.sim
    reason = get_backend(sim).unavailable_reason()
    if sim == "verilator" and reason and not args.no_fallback:
        print(f"note: Verilator cannot run here ({reason}); running the same programs on pysim instead, "
              f"about a thousand times slower", file=sys.stderr)
        sim = "pysim"
    modes = ("inorder", "decoupled") if args.mode == "both" else (config.mode.value,)
    by_mode, all_rows = {}, []
    for n, mode in enumerate(modes):
        cfg = config.replace(mode=mode)
        bar = progress_bar(table_runs(cfg, args.lengths), args.no_progress, "run")
        rows, seconds = decode_table(cfg, sim, args.seed, args.lengths, args.key_digits,
                                     progress=lambda: bar.update(1))
        bar.close()
        if n:
            print()
        _print(rows, cfg, sim, seconds)
        by_mode[mode] = rows
        all_rows += rows
    if len(modes) == 2:
        print()
        _print_side_by_side(by_mode)
    if args.json:
        write_json(args.json, {"config": config.to_dict(), "modes": list(modes), "sim": sim, "programs": all_rows})
    if args.plot:
        plot_modes(args.plot, by_mode, config, args.seed)
    return 0 if all(r["matches_reference"] for r in all_rows) else 1


def register(sub):
    from ga2_sw.cli import add_config_arguments
    from sim.backends import backend_names
    p = sub.add_parser("decode-table", help="cycles, traffic and roofline of the chapter's decode steps")
    p.add_argument("--sim", choices=backend_names(), default="model", help="simulator (default %(default)s)")
    p.add_argument("--seed", type=Int(*SEED), default=4242,
                   help=f"workload seed, {SEED[0]}..{SEED[1]} (default %(default)s)")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the rows as JSON")
    p.add_argument("--plot", metavar="FILE.png", type=plot_option(),
                   help="draw both modes and the decoupled lanes into a PNG (or .pdf, .svg)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (the runs of a long context "
                   "take seconds each)")
    p.add_argument("--no-fallback", action="store_true",
                   help="fail instead of falling back to pysim when Verilator cannot run")
    p.add_argument("--mode", choices=("inorder", "decoupled", "both"), default=None,
                   help="execution mode(s) to run; both prints the chip in each mode side by side (default: the "
                        "chip's mode)")
    p.add_argument("--lengths", metavar="L,L,...", type=LENGTHS,
                   help="one batch of sequences at these context lengths instead of the five programs: each "
                        "1..--max-ctx, one to --rows of them")
    p.add_argument("--key-digits", metavar="N", type=Int(min(KEY_DIGITS), max(KEY_DIGITS)), default=1,
                   help="int8 digits per key of the long-context steps, 1..2 (default 1; 2: wide keys, the new "
                        "keys' digits made on the chip, docs/LONG_CONTEXT.md; needs the online unit)")
    add_config_arguments(p, mode=False)
    # The memories: Config's defaults for the chapter's path; sized to the steps on a chip with the online unit
    # (table_config), unless given.
    p.set_defaults(func=_run, check=_check, **{f"cfg_{name}": None for name in SIZED})
    for action in p._actions:
        if action.dest[4:] in SIZED:
            action.help = action.help.replace("default: the chip's", "default: the chip's, or sized to the "
                                              "long-context steps with the online unit")


# The memory fields decode-table sizes to the long-context steps unless they are given.
SIZED = ("sp_words", "ext_words", "imem_words")


def table_config(args):
    """The command line's chip. With the online unit, the memories not given are sized to the steps: the
    smallest powers of two that hold the layout, ``rows`` sequences and the longest program."""
    from ga2_sw.cli import config_from_args
    from ga2_sw.online_decode import sized_config
    config = config_from_args(args)
    if not config.online_unit:
        return config
    given = {name: getattr(args, f"cfg_{name}") for name in SIZED}
    sized = sized_config(config, args.lengths or [config.max_ctx] * config.rows, sequences=config.rows,
                         key_digits=args.key_digits)
    return config.replace(**{name: given[name] if given[name] is not None else getattr(sized, name)
                             for name in SIZED})


def _check(args):
    """A simulator that cannot run here is refused now (exit status 4), unless Verilator may fall back."""
    from sim.backends import get_backend
    from ga2_sw.layout import Layout
    from ga2_sw.online_decode import OnlineDecodeLayout
    config = table_config(args)
    if args.key_digits != 1 and not config.online_unit:
        raise ValueError("--key-digits 2 (wide keys) needs the online unit: --chip long, or --online-unit 1")
    if config.online_unit:                                              # the steps must fit the memories
        OnlineDecodeLayout(config, args.key_digits)
    else:
        Layout(config)
    if args.lengths is not None:
        if len(args.lengths) > config.rows:
            raise ValueError(f"--lengths: at most {config.rows} lengths (config field 'rows', one sequence per "
                             f"array row), not {len(args.lengths)}")
        if max(args.lengths) > config.max_ctx:
            raise ValueError(f"--lengths: each length must be in 1..{config.max_ctx} (config field 'max_ctx'), "
                             f"not {max(args.lengths)}")
    if args.sim != "verilator" or args.no_fallback:
        get_backend(args.sim).require()
