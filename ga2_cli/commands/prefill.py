"""``ga2 prefill``: a prompt of T tokens through one attention head in one program (the compute-bound phase),
run on a simulator, checked against an integer reference, with its MACs per cycle against the array's peak."""

import sys
import time

from ga2_sw.analyses.common import finish_plot, json_option, plot_option, table, write_json
from ga2_sw.config import Config, sized_memories
from ga2_sw.options import SEED, Int

__all__ = ["register", "prefill_config", "run_prefill"]

# The fields the command sizes to the prefill unless they are given: the memories and the context.
SIZED = ("sp_words", "ext_words", "imem_words", "max_ctx", "sm_max_len")


def prefill_config(args):
    """The chip of the command line, with each field of ``SIZED`` not given sized to the prefill: the context
    to ``--tokens``, the memories to the smallest power of two that holds the layout and the program.
    PrefillError (one line naming the field) when a given field is too small."""
    from ga2_sw.cli import config_from_args
    from ga2_sw.prefill import PrefillError, needed_config
    T = args.tokens
    given = {name: getattr(args, f"cfg_{name}") for name in SIZED}
    base = config_from_args(args, drop=SIZED)
    sm = given["sm_max_len"] or max(base.sm_max_len, T)
    if sm < T:
        raise PrefillError(f"--sm-max-len is {sm}, but each row of a {T}-token prefill is one softmax of up to "
                           f"{T} scores (give at least {T}, or leave it out)")
    ctx = given["max_ctx"] or T
    if ctx < T:
        raise PrefillError(f"--max-ctx is {ctx}, but the prefill holds {T} tokens (give at least {T}, or leave it out)")
    shape = base.replace(max_ctx=ctx, sm_max_len=sm).with_largest_memories()
    sp, ext, length = needed_config(shape, T)
    what = f"a prefill of {T} tokens with d_model={base.d_model}, d={base.d} on {base.rows}x{base.cols}"
    fields = sized_memories({"sp_words": sp, "ext_words": ext, "imem_words": length}, given,
                            {"sp_words": base.sp_banks * 8, "ext_words": 64, "imem_words": 2}, what, PrefillError)
    return shape.replace(**fields)


def run_prefill(config, tokens, sim="model", seed=4242):
    """``(row, program)``: the prefill of ``tokens`` tokens run on ``sim``, checked against the reference
    machine (memories, counters) and the integer reference (outputs and caches)."""
    import numpy as np
    from sim.backends import get_backend
    from sim.compare import compare_results
    from ga2_sw import decode, prefill
    from ga2_sw.machine import Machine
    w = decode.make_workload(config, 1, tokens, seed)
    P = decode.rq_params(w)
    lay = prefill.PrefillLayout(config, tokens)
    prog = prefill.program(config, tokens, P, lay)
    ext = prefill.ext_image(w, lay)
    t0 = time.perf_counter()
    (got,) = get_backend(sim).run_many(config, [(prog, ext)])
    seconds = time.perf_counter() - t0
    if not got.ok:
        raise RuntimeError(f"prefill: {sim} faulted with {got.error.name} at pc {got.pc}")
    ref = Machine(config).run(prog, ext)
    diffs = compare_results(ref, got)
    out, want = prefill.results(lay, got.ext), prefill.reference(w, P, tokens)
    macs, words = decode.traffic(prog)
    c = got.counters
    peak = config.peak_macs_per_cycle
    row = {"tokens": tokens, "d_model": config.d_model, "d": config.d, "mode": config.mode.value,
           "rows": config.rows, "cols": config.cols, "cycles": c.cycles, "macs": macs,
           "useful_macs": prefill.useful_macs(config, tokens), "macs_per_cycle": round(macs / c.cycles, 3),
           "peak_macs_per_cycle": peak, "of_peak": round(macs / c.cycles / peak, 4), "words": words,
           "mm_cycles": c.mm, "dma_cycles": c.dma, "vec_cycles": c.vec, "instructions": c.instructions,
           "bank_conflict_cycles": prefill.bank_conflict_cycles(prog, config),
           "matches_model": not diffs,
           "matches_reference": all(np.array_equal(out[k], want[k]) for k in ("out", "k", "v")),
           "seconds": round(seconds, 2)}
    return row, prog


def _print(row, config, sim):
    peak = row["peak_macs_per_cycle"]
    print(f"prefill of {row['tokens']} tokens, one head (d_model {config.d_model}, d {config.d}), on {sim}: "
          f"{config.rows}x{config.cols} array, {config.mode.value}, scratchpad {config.sp_words:,} words in "
          f"{config.sp_banks} banks")
    c = row["cycles"]
    body = [["cycles", f"{c:,}", ""],
            ["MACs (array)", f"{row['macs']:,}", f"{row['useful_macs']:,} needed by the causal mask"],
            ["MACs / cycle", f"{row['macs_per_cycle']:.2f}", f"{100 * row['of_peak']:.1f}% of the peak {peak}"],
            ["words moved", f"{row['words']:,}", f"{row['macs'] / row['words']:.1f} MACs a word"],
            ["matrix lane", f"{row['mm_cycles']:,}", f"{100 * row['mm_cycles'] / c:.1f}% of the cycles "
             f"({row['bank_conflict_cycles']:,} lost to bank conflicts)"],
            ["DMA lane", f"{row['dma_cycles']:,}", f"{100 * row['dma_cycles'] / c:.1f}%"],
            ["vector lane", f"{row['vec_cycles']:,}", f"{100 * row['vec_cycles'] / c:.1f}%"],
            ["instructions", f"{row['instructions']:,}", ""],
            ["= reference machine", "yes" if row["matches_model"] else "NO", "memories and the six counters"],
            ["= integer reference", "yes" if row["matches_reference"] else "NO", "outputs, K and V caches"]]
    print(table(["", "value", ""], body, ["<", ">", "<"]))
    busiest = max(("matrix", row["mm_cycles"]), ("DMA", row["dma_cycles"]), ("vector", row["vec_cycles"]),
                  key=lambda p: p[1])
    print(f"the busiest lane: {busiest[0]} ({100 * busiest[1] / c:.0f}% of the cycles)")


def plot_prefill(path, prog, config, row):
    """The three lanes over the prefill's cycles (the cycle model's schedule)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from .decode_table import draw_lanes
    fig, ax = plt.subplots(figsize=(13, 3.6))
    draw_lanes(ax, prog, config)
    ax.set_title(f"prefill of {row['tokens']} tokens on {config.rows}x{config.cols} ({config.mode.value}): "
                 f"{row['cycles']:,} cycles, {row['macs_per_cycle']:.1f} MACs/cycle of {row['peak_macs_per_cycle']}")
    finish_plot(fig, path)


def _run(args):
    from sim.backends import get_backend
    config = prefill_config(args)
    sim = args.sim
    reason = get_backend(sim).unavailable_reason()
    if sim == "verilator" and reason and not args.no_fallback:
        print(f"note: Verilator cannot run here ({reason}); running on pysim instead", file=sys.stderr)
        sim = "pysim"
    row, prog = run_prefill(config, args.tokens, sim, args.seed)
    _print(row, config, sim)
    if args.json:
        write_json(args.json, {"config": config.to_dict(), "sim": sim, **row})
    if args.plot:
        plot_prefill(args.plot, prog, config, row)
    return 0 if row["matches_model"] and row["matches_reference"] else 1


def _check(args):
    """The sizes (a given memory too small for the prefill: exit status 2) and the simulator (exit status 4)."""
    from sim.backends import get_backend
    from ga2_sw.options import ToolMissing
    prefill_config(args)
    reason = get_backend(args.sim).unavailable_reason()
    if reason and not (args.sim == "verilator" and not args.no_fallback):
        raise ToolMissing(f"--sim {args.sim}: {reason}")


def register(sub):
    from ga2_sw.cli import add_config_arguments
    from sim.backends import backend_names
    p = sub.add_parser("prefill", help="a prompt's T tokens through one head in one program: MACs per cycle")
    p.add_argument("--tokens", type=Int(1, Config.field_range("sm_max_len")[1]), default=64,
                   help=f"prompt tokens T, 1..{Config.field_range('sm_max_len')[1]} (default %(default)s)")
    p.add_argument("--sim", choices=backend_names(), default="model", help="simulator (default %(default)s)")
    p.add_argument("--seed", type=Int(*SEED), default=4242,
                   help=f"workload seed, {SEED[0]}..{SEED[1]} (default %(default)s)")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the row as JSON")
    p.add_argument("--plot", metavar="FILE.png", type=plot_option(), help="draw the lanes over time into a PNG")
    p.add_argument("--no-fallback", action="store_true",
                   help="fail instead of falling back to pysim when Verilator cannot run")
    add_config_arguments(p)
    # Sized to the prefill unless given (prefill_config).
    p.set_defaults(func=_run, check=_check, **{f"cfg_{name}": None for name in SIZED})
    for action in p._actions:
        if action.dest[4:] in SIZED:
            action.help = action.help.replace("default: the chip's", "default: sized to the prefill")
