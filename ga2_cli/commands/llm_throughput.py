"""``ga2 llm throughput``: SmolLM2-135M's whole decode step on a chip (``ga2_sw.llm.whole_step``), per batch and
context: the step's cycles (its programs on the cycle model plus the host's round trips), tokens/s at the chip's
measured Fmax, and the two bounds a step cannot beat, the DRAM's (weights and KV caches over the memory's peak)
and the array's (the MACs over rows x cols a cycle): the chapter's argument, measured on a real model."""

from ga2_sw.analyses.common import emit, finish_plot, json_option, plot_option, progress_bar, table
from ga2_sw.llm.ga2_path import HEAD_CANDIDATES, PATH_KEY_DIGITS, WEIGHT_DIGITS
from ga2_sw.numerics import KEY_DIGITS
from ga2_sw.options import Int, IntList

__all__ = ["add_throughput", "add_key_and_head_options", "head_candidates", "phase_table", "plot_phases"]

BATCHES = IntList(1, 16)
DEFAULT_BATCHES = (1, 2, 4, 8)
CONTEXTS = IntList(1, 4096)


def _config(args):
    from ga2_sw.cli import config_from_args
    return config_from_args(args)


def _check(args):
    """Every batch's step fits the chip at the longest context (its programs' memories and instructions)."""
    from ga2_sw.llm.whole_step import Host, step_numerics, step_phases
    config = _config(args)
    if not config.online_unit:
        raise ValueError(f"--chip {args.chip}: the step's attention needs the online unit (--online-unit 1)")
    try:
        args.digits, _ = step_numerics(config, args.input_digits)
    except ValueError as exc:
        raise ValueError(f"--input-digits {args.input_digits}: {exc}") from None
    given, args.batches, args.left_out = args.batches_asked is not None, [], []
    asked = args.batches_asked if given else DEFAULT_BATCHES
    for B in asked:
        try:
            step_phases(config, [max(args.contexts)] * B, digits=args.digits, **_wide(args))
            args.batches.append(B)
        except ValueError as exc:
            args.left_out.append((B, str(exc)))         # the batches are those of the asked that fit the chip
    if not args.batches:
        B, why = args.left_out[0]
        if given:
            raise ValueError(f"--batches {B} at --contexts {max(args.contexts)}: {why}")
        raise ValueError(f"--chip {args.chip}: no batch of {', '.join(map(str, asked))} fits: {why}")
    args.host = Host(sync_cycles=args.sync_cycles)


def _run(args):
    from ga2_sw.chips import measured_fmax, name_of
    from ga2_sw.llm.whole_step import memory_bytes_per_cycle, phase_count, throughput_rows
    config = _config(args)
    name = name_of(config)
    fmax = measured_fmax(name) if name else None
    bar = progress_bar(sum(phase_count(config, B, L, digits=args.digits, **_wide(args)) for B in args.batches
                           for L in args.contexts), args.no_progress, "program")
    rows = throughput_rows(config, args.batches, args.contexts, fmax, host=args.host,
                           progress=lambda: bar.update(1), digits=args.digits, **_wide(args))
    bar.close()
    for B, why in args.left_out:
        print(f"(B = {B} left out: {why})")
    clock = fmax or config.clock_mhz
    chip = name or f"{args.chip} (changed)"
    at = f"{fmax:g} MHz, its measured Fmax" if fmax else f"{config.clock_mhz} MHz (no measured Fmax: no datasheet of the chip with seeds 1, 2 and 3 routed)"
    print(f"SmolLM2-135M's decode step on the {chip} chip ({config.rows} x {config.cols}, {config.bus_bytes}-byte "
          f"port, {config.memory} at {memory_bytes_per_cycle(config):g} bytes a cycle): every product of 30 blocks "
          f"and the LM head, weights streamed once a step, {_numerics(args, config)}; host round trips "
          f"{args.host.sync_cycles} cycles each plus their bytes and programs; tokens/s at {at}")
    print(table(["batch", "context", "cycles", "chip", "host", "tokens/s", "DRAM bound", "compute bound",
                 "bound / cycles"],
                [[r["batch"], f"{r['context']:,}", f"{r['cycles']:,}", f"{r['chip_cycles']:,}",
                  f"{r['host_cycles']:,}", f"{r['tokens_per_s']:,.2f}", f"{r['dram_bound_cycles']:,}",
                  f"{r['compute_bound_cycles']:,}", f"{r['fraction_of_bound']:.1%} ({r['bound']})"] for r in rows],
                [">"] * 9))
    if args.phases:
        for r in rows:
            print(f"\nWhere the cycles of B = {r['batch']} at {r['context']:,} tokens go:")
            print(phase_table(r["phases"], memory_bytes_per_cycle(config)))
    out = {"chip": name, "config": config.to_dict(), "fmax_mhz": fmax, "clock_mhz": clock,
           "memory": config.memory, "memory_bytes_per_cycle": memory_bytes_per_cycle(config),
           "host": {"sync_cycles": args.host.sync_cycles, "load_bytes_per_cycle": args.host.load_bytes_per_cycle},
           "input_digits": args.digits, **_wide(args), "int32_sums": bool(config.st_words), "rows": rows,
           "left_out": [{"batch": B, "why": why} for B, why in args.left_out]}
    wide = ", ".join(w for w, n in (("wide weights", args.weight_digits), ("wide keys", args.key_digits)) if n == 2)
    emit(args, out, lambda path: plot_throughput(path, rows, chip, clock, wide))
    if args.phases_plot:
        plot_phases(args.phases_plot, rows, chip)
    return 0


def phase_table(phases, bytes_per_cycle):
    """A step's phases (``whole_step.step_cost``) as a table: each phase's cycles, its round trips' share, its
    units' busy cycles (the matrix unit's beside what its MMs take each alone, the DMA's with its waits on the
    DRAM) and the cycles its weights and KV caches take at the memory's peak."""
    body = []
    for name, p in phases.items():
        peak = round((p["weights"] + p["kv"]) / bytes_per_cycle)
        body.append([name, f"{p['programs']:,}", f"{p['cycles']:,}", f"{p['host']:,}", f"{p['chip']:,}",
                     f"{p['matrix']:,}", f"{p['mms_alone']:,}", f"{p['dma']:,}", f"{p['dram_wait']:,}",
                     f"{p['vector']:,}", f"{peak:,}", f"{p['chip'] / peak:.2f}" if peak else "-"])
    return table(["phase", "programs", "cycles", "host", "chip", "matrix busy", "its MMs alone", "DMA busy",
                  "DRAM waits", "vector busy", "bytes at peak", "chip / peak"], body, ["<"] + [">"] * 11)


def _wide(args):
    """The step's weight and key digits and the LM head's candidates (``whole_step.step_phases``)."""
    return {"weight_digits": args.weight_digits, "key_digits": args.key_digits,
            "head_candidates": head_candidates(args)}


def head_candidates(args):
    """The LM head's candidates read again with 15-bit weights: none with wide weights (the whole head has them)."""
    return 0 if args.weight_digits == 2 else args.head_candidates


def add_key_and_head_options(p):
    """``--key-digits`` and ``--head-candidates``, the path's numerics that ``ga2 llm eval``, ``generate`` and
    ``throughput`` share (``ga2_path.PATH_KEY_DIGITS``, ``HEAD_CANDIDATES``)."""
    p.add_argument("--key-digits", type=int, choices=KEY_DIGITS, default=PATH_KEY_DIGITS,
                   help="int8 planes of the key cache: 2, wide keys of 15 bits (default, docs/LONG_CONTEXT.md), or "
                        "1, int8 keys")
    p.add_argument("--head-candidates", metavar="N", type=Int(0, 1024), default=HEAD_CANDIDATES,
                   help="the LM head's best candidates a token computes again with 15-bit weights, from a second "
                        "plane of the head's rounding errors, 0..1024 (default %(default)s; 0: the int8 head "
                        "alone; none with --weight-digits 2; docs/LLM.md)")


def _numerics(args, config):
    """The products' numerics in words: what their inputs are and what leaves the chip."""
    given = "a 15-bit input as two int8 digit rows a token" if args.digits == 2 else "an int8 input row a token"
    out = "their int32 sums stored whole" if config.st_words else "their sums requantised to int8 on the chip"
    weights = "wide weights after the attention (two int8 planes)" if args.weight_digits == 2 else "int8 weights"
    keys = "wide keys" if args.key_digits == 2 else "int8 keys"
    head = head_candidates(args)
    rescore = f", the head's best {head} rows a sequence again at 15 bits" if head else ""
    return f"{given}, {out}, {weights}, {keys}{rescore}"


def plot_throughput(path, rows, chip, clock_mhz, numerics=""):
    """Tokens/s against batch, a line per context, beside the bound (dashed): the fewer of the DRAM's tokens/s
    (the weights' read shared by the batch, rising with it) and the array's (flat), so the knee where batching
    stops paying shows; ``numerics`` (such as "wide weights") goes into the title."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.8))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    per_s = clock_mhz * 1e6
    batches = sorted({r["batch"] for r in rows})
    for k, L in enumerate(sorted({r["context"] for r in rows})):
        mine = sorted((r for r in rows if r["context"] == L), key=lambda r: r["batch"])
        xs = [r["batch"] for r in mine]
        colour = colours[k % len(colours)]
        ax.plot(xs, [r["tokens_per_s"] for r in mine], "o-", color=colour, label=f"measured, context {L:,}")
        ax.plot(xs, [r["batch"] * per_s / max(r["dram_bound_cycles"], r["compute_bound_cycles"]) for r in mine],
                "--", color=colour, label=f"bound (DRAM, then compute), context {L:,}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_xlabel("batch (sequences a step)")
    ax.set_ylabel(f"tokens/s at {clock_mhz:g} MHz")
    ax.set_title(f"SmolLM2-135M on the {chip} chip: a step reads every weight once"
                 + (f"\n{numerics}" if numerics else ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    finish_plot(fig, path)


def plot_phases(path, rows, chip):
    """Where each row's cycles go: a bar a row, its phases' chip cycles stacked and the host's round trips last,
    beside a mark at the larger bound, so what stands between a step and its bound shows at a glance."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(name for r in rows for name in r["phases"]))      # every row's, in step order
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(10, 1.6 + 0.45 * len(rows)))
    labels = [f"B = {r['batch']}, {r['context']:,} tokens" for r in rows]
    for y, r in enumerate(rows):
        left = 0
        for k, name in enumerate(names):
            width = r["phases"].get(name, {"chip": 0})["chip"] / 1e6
            ax.barh(y, width, left=left, color=colours[k % len(colours)], label=name if y == 0 else None)
            left += width
        host = r["host_cycles"] / 1e6
        ax.barh(y, host, left=left, color="0.75", hatch="//", label="host round trips" if y == 0 else None)
        bound = max(r["dram_bound_cycles"], r["compute_bound_cycles"]) / 1e6
        ax.plot([bound, bound], [y - 0.45, y + 0.45], color="black", linewidth=2,
                label="bound (max of DRAM, compute)" if y == 0 else None)
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("cycles a step (millions)")
    ax.set_title(f"SmolLM2-135M's decode step on the {chip} chip: where the cycles go")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    finish_plot(fig, path)


def add_throughput(llm):
    from ga2_sw.cli import add_config_arguments
    p = llm.add_parser("throughput", help="SmolLM2-135M's whole decode step on a chip: cycles, tokens/s and the "
                                          "DRAM and compute bounds, per batch and context")
    p.add_argument("--batches", metavar="B,B", type=BATCHES, dest="batches_asked",
                   help="sequences a step, each 1..16, those whose step fits the chip (the others are named and "
                        "left out; default 1,2,4,8)")
    p.add_argument("--contexts", metavar="L,L", type=CONTEXTS, default=[64, 1024],
                   help="tokens of context of every sequence, each 1..4096 (default 64,1024)")
    p.add_argument("--input-digits", type=int, choices=(1, 2), default=None,
                   help="int8 rows a token's input takes in every product: 2, the 15-bit input ga2 llm eval "
                        "measures (default on a chip that stores int32 sums, st_words = 1), or 1, an int8 input "
                        "(half the array's rows; the default elsewhere)")
    p.add_argument("--weight-digits", type=int, choices=WEIGHT_DIGITS, default=1,
                   help="int8 planes of the weights of the output projection, gate, up, down and the LM head: 1 "
                        "(default) or 2, the wide weights ga2 llm eval --weight-digits 2 measures (twice their "
                        "bytes)")
    add_key_and_head_options(p)
    p.add_argument("--sync-cycles", type=Int(0, 1_000_000), default=500,
                   help="cycles a host round trip takes besides its bytes and program, 0..1000000 (default "
                        "%(default)s: 5 us at 100 MHz)")
    p.add_argument("--phases", action="store_true",
                   help="also print where each row's cycles go: each phase's programs, round trips, units' busy "
                        "cycles and the cycles its weights and caches take at the memory's peak")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the rows as JSON")
    p.add_argument("--plot", metavar="FILE.png", type=plot_option(),
                   help="draw tokens/s against batch with both bounds (.png, .pdf, .svg)")
    p.add_argument("--phases-plot", metavar="FILE.png", type=plot_option(),
                   help="draw where each row's cycles go: its phases' chip cycles and round trips beside its bound "
                        "(.png, .pdf, .svg)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_arguments(p, chip="llm")
    p.set_defaults(func=_run, check=_check)
