"""``ga2 bus-width``: the chapter's decode steps on the decoupled chip as the external port widens from one
int8 element in a 32-bit word per cycle to 4, 8 and 16 packed bytes per beat (``Config.bus_bytes``,
docs/ARCHITECTURE.md "The packed external port"), against the memory bound in beats and the busy time of the
compute lanes: where the step stops being memory-bound."""

from ga2_sw.config import BUS_BYTES
from ga2_sw.options import IntList
from ga2_sw.analyses.common import chip_options, emit, finish_plot, json_option, plot_option, table

__all__ = ["bus_rows", "register", "check_widths"]

WIDTHS = IntList(1, max(BUS_BYTES), max_items=len(BUS_BYTES))
# The banks the table runs on when a width asked needs more than the chip has: more than 16 bytes a beat.
WIDE_BANKS = 32


def bus_rows(config, widths, sim="model", seed=4242, ld_overlap=0):
    """One row per width and program (``ga2_cli.commands.decode_table.decode_table`` rows with ``bus_bytes``),
    each checked against the reference machine on ``sim``; with ``ld_overlap``, the packed widths' chips overlap
    their LDs (the word port has no overlapped LDs)."""
    from sim.decode_table import decode_table
    rows = []
    for w in widths:
        rows += decode_table(config.replace(bus_bytes=w, ld_overlap=ld_overlap if w > 1 else 0), sim, seed)[0]
    return rows


def _bound(row):
    """What the step cannot beat: the beats, or the busiest compute lane, and its name."""
    return max((row["beats"], "memory"), (row["mm_cycles"], "matrix lane"), (row["vec_cycles"], "vector lane"))


def _run(args):
    from ga2_sw.cli import config_from_args
    widths = args.widths or list(BUS_BYTES)         # validated by _check before any work
    config = config_from_args(args)
    banks = f"{config.sp_banks} banks"
    if args.cfg_sp_banks is None and max(widths) >= config.sp_banks:
        banks = f"{WIDE_BANKS} banks (the chip's {config.sp_banks} are too few for {max(widths)} bytes a beat)"
        config = config.replace(sp_banks=WIDE_BANKS)
    overlap = config.ld_overlap if args.ld_overlap is None else args.ld_overlap     # default: the chip's
    rows = bus_rows(config, widths, args.sim, args.seed, overlap)
    body = []
    for r in rows:
        bound, what = _bound(r)
        body.append([r["bus_bytes"], r["name"], r["cycles"], r["beats"], f"{r['cycles'] / r['beats']:.2f}",
                     r["mm_cycles"], r["vec_cycles"], what, f"{r['cycles'] / bound:.2f}",
                     "yes" if r["matches_reference"] else "NO"])
    options = chip_options(config.replace(ld_overlap=0))     # ld_overlap named below: the packed widths only
    if overlap:
        options += ", overlapped LDs (packed widths)"
    print(f"decode steps on {args.sim}: the decoupled {config.rows}x{config.cols} chip, {banks}"
          f"{options}, as the external port widens (a beat per cycle)")
    print(table(["bytes/beat", "program", "cycles", "beats", "x beats", "matrix busy", "vector busy", "bound by",
                 "x bound", "= model"], body, [">", "<"] + [">"] * 6 + ["<", ">"]))
    for w in widths:
        step = [r for r in rows if r["bus_bytes"] == w and r["batch"] == config.rows and "ragged" not in r["name"]]
        if step:
            bound, what = _bound(step[0])
            print(f"{w:>2} bytes/beat: the B = {config.rows} step takes {step[0]['cycles']:,} cycles for "
                  f"{step[0]['beats']:,} beats ({step[0]['cycles'] / step[0]['beats']:.2f} x), bound by the {what}")
    plot = (lambda path: _plot(path, rows, config)) if args.plot else None
    return emit(args, {"config": config.to_dict(), "sim": args.sim, "rows": rows}, plot)


def _plot(path, rows, config):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    step = [r for r in rows if r["batch"] == config.rows and "ragged" not in r["name"]]
    widths = [r["bus_bytes"] for r in step]
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    ax.plot(widths, [r["cycles"] for r in step], "o-", color="black", label="cycles of the step")
    ax.plot(widths, [r["beats"] for r in step], "s--", color="tab:blue", label="memory bound (beats)")
    ax.plot(widths, [r["mm_cycles"] for r in step], "^:", color="tab:orange", label="matrix lane busy")
    ax.plot(widths, [r["vec_cycles"] for r in step], "v:", color="tab:green", label="vector lane busy")
    ax.set_xscale("log", base=2)
    ax.set_xticks(widths, [str(w) for w in widths])
    ax.set_xlabel("int8 elements per beat (1: one per 32-bit word, the chapter's port)")
    ax.set_ylabel("cycles")
    ax.set_title(f"B = {config.rows} decode step at token {config.max_ctx}, decoupled {config.rows}x{config.cols}: "
                 "where it turns compute-bound", fontsize="medium")
    ax.legend()
    finish_plot(fig, path)


def register(sub):
    from ga2_sw.cli import add_config_arguments
    from sim.backends import backend_names
    from ga2_sw.options import SEED, Int
    p = sub.add_parser("bus-width", help="the decode steps as the external port widens (bytes per beat)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--widths", metavar="W,W,...", type=WIDTHS,
                   help=f"bytes per beat to run, each one of {', '.join(map(str, BUS_BYTES))} (default all)")
    p.add_argument("--sim", choices=backend_names(), default="model", help="simulator (default %(default)s)")
    p.add_argument("--seed", type=Int(*SEED), default=4242, help="workload seed (default %(default)s)")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the rows as JSON")
    p.add_argument("--plot", metavar="FILE.png", type=plot_option(), help="draw the B = R step against the widths")
    add_config_arguments(p, mode=False)
    # Decoupled only (a packed port needs the banks): the chip's banks, or WIDE_BANKS where a width asked needs
    # more than the chip has.
    p.set_defaults(func=_run, cfg_mode="decoupled", check=_check)
    for action in p._actions:
        if action.dest == "cfg_sp_banks":
            action.help = action.help.replace("default: the chip's", f"default: the chip's, or {WIDE_BANKS} where "
                                              "a width asked needs more banks than the chip has")
        if action.dest == "cfg_ld_overlap":     # the packed widths' chips only: not a field of the base chip
            action.dest, action.default = "ld_overlap", None
            action.help = action.help.replace("; default: the chip's", "; here at 4, 8 and 16 bytes a beat only; "
                                                                       "default: the chip's")


def check_widths(widths, sp_banks):
    """ValueError (one line naming --widths) unless every width is a bus width a chip of ``sp_banks`` banks can
    have."""
    unknown = [w for w in widths if w not in BUS_BYTES]
    if unknown:
        raise ValueError(f"--widths: each must be one of {', '.join(map(str, BUS_BYTES))}, not {unknown[0]}")
    if max(widths) >= sp_banks:
        raise ValueError(f"--widths: {max(widths)} bytes a beat need more than {max(widths)} banks "
                         f"(--sp-banks {sp_banks})")


def _check(args):
    # The banks given, or the chip's, or WIDE_BANKS where a width needs more (_run): enough for every width.
    check_widths(args.widths or list(BUS_BYTES), args.cfg_sp_banks or WIDE_BANKS)
    if args.ld_overlap:         # validated here: the base chip (config_from_args) leaves it out
        from ga2_sw.cli import config_from_args
        config = config_from_args(args)
        packed = [w for w in args.widths or list(BUS_BYTES) if w > 1]
        if not packed:
            raise ValueError("--ld-overlap 1: --widths has no packed width (4, 8 or 16) to overlap LDs on")
        config.replace(bus_bytes=packed[0], ld_overlap=1)       # the bare port only: refused with axi = 1
    from sim.backends import get_backend
    get_backend(args.sim).require()
