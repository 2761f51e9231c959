"""Traffic, arithmetic intensity and the roofline of the batched decode step (``ga2 traffic``, ``ga2 roofline``).

Two kinds of figures live here and are kept apart on purpose:

* MEASURED from the real programs: the MACs and words of ``decode.program`` (counted by ``decode.traffic``)
  and the cycles of ``cycles.cycle_counts``, for batches of 1..rows sequences at ``max_ctx`` tokens and for
  the ragged batch of ``check.ragged_lengths``.
* DERIVED from the traffic formula, which the tests hold equal to the programs: a step moves
  ``3 * d_model * d`` words of weights once, plus ``d_model + 2 * (L - 1) * d + 3 * d`` words per sequence
  (its hidden state, its K and V caches, the new k and v rows and its output). On the 4x4 default that is
  768 + 544 per sequence at L = 16. The intensity at any batch, and its limit as the batch grows, follow.

The projections reuse the weights across the batch; attention uses each cached word for exactly one MAC,
so as L grows the per-sequence work approaches one MAC per word and the limit tends to 1: no batch size
takes a decode step across the ridge point.
"""

from .. import check, cycles, decode
from ..isa import Err
from ..cli import add_config_arguments, config_from_args
from .common import add_output_arguments, emit, finish_plot, table

__all__ = ["weight_words", "sequence_words", "sequence_macs", "step_words", "step_macs", "intensity",
           "intensity_limit", "measured_programs", "traffic_report", "roofline_report",
           "INTENSITY_BATCHES", "LIMIT_CONTEXTS", "register"]

# The batch sizes the chapter tabulates the intensity for (1e6 stands for "unlimited").
INTENSITY_BATCHES = (1, 2, 4, 16, 64, 1_000_000)
# Contexts for the limit-versus-context table: far beyond max_ctx on purpose, since the formula is what
# shows where long contexts go (the programs themselves stop at max_ctx).
LIMIT_CONTEXTS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)


# -- the traffic formula -------------------------------------------------------------------------------------

def weight_words(config):
    """Words of Wq | Wk | Wv: loaded once per step, whatever the batch (the shared part)."""
    return 3 * config.d_model * config.d


def sequence_words(config, L):
    """Words one sequence at token L adds to a step: its hidden state (d_model), its K and V caches of
    L - 1 earlier rows (2 (L-1) d), the new k and v rows stored back (2 d) and its output (d). With the online
    unit the caches stream from external memory with the new rows in them (2 L d) and the state's two starting
    words are loaded (``ga2_sw.online_decode``)."""
    if config.online_unit:
        return config.d_model + 2 * L * config.d + 3 * config.d + 2
    return config.d_model + 2 * (L - 1) * config.d + 3 * config.d


def sequence_macs(config, L):
    """MACs one sequence at token L adds: its row of the three projections (3 d_model d, sharing the
    weights) and attention over its own L cached keys and values (2 L d, sharing nothing)."""
    return 3 * config.d_model * config.d + 2 * L * config.d


def step_words(config, lengths):
    return weight_words(config) + sum(sequence_words(config, L) for L in lengths)


def step_macs(config, lengths):
    return sum(sequence_macs(config, L) for L in lengths)


def intensity(config, batch, L):
    """MACs per word of a step with ``batch`` sequences all at token L (formula; any batch size)."""
    return batch * sequence_macs(config, L) / (weight_words(config) + batch * sequence_words(config, L))


def intensity_limit(config, L):
    """The intensity as the batch grows without bound: the weights vanish from the ratio and only the
    per-sequence MACs over the per-sequence words remain."""
    return sequence_macs(config, L) / sequence_words(config, L)


# -- the measured programs ------------------------------------------------------------------------------------

def measured_programs(config, seed=1):
    """The programs of the chapter's table, built by ``decode.program``: B = 1..rows at max_ctx, then the
    ragged batch. Returns [{"name", "lengths", "macs", "words", "cycles", "counters"}].

    The requantisation parameters come from one workload; MACs, words and cycles do not depend on the data."""
    P = decode.rq_params(decode.make_workload(config, config.rows, config.max_ctx, seed))
    L = config.max_ctx
    shapes = [(f"B={n} (all at token {L})", (L,) * n) for n in range(1, config.rows + 1)]
    ragged = tuple(check.ragged_lengths(config))
    shapes.append((f"B={len(ragged)} ragged {ragged}", ragged))
    out = []
    for name, lengths in shapes:
        prog = decode.program(config, list(range(len(lengths))), list(lengths), P)
        macs, words = decode.traffic(prog)
        counters, err, pc = cycles.cycle_counts(prog, config)
        if err != Err.NONE:          # a builder bug must not be reported as a timing
            raise RuntimeError(f"program {name} faults with {err.name} at pc {pc}")
        out.append({"name": name, "lengths": list(lengths), "macs": macs, "words": words,
                    "cycles": counters.cycles, "counters": counters})
    return out


def traffic_report(config, programs=None):
    """Everything ``ga2 traffic`` prints, as plain data (JSON-ready apart from nothing)."""
    programs = programs if programs is not None else measured_programs(config)
    L = config.max_ctx
    return {
        "programs": [{"name": p["name"], "lengths": p["lengths"], "macs": p["macs"], "words": p["words"]}
                     for p in programs],
        "intensity": [{"batch": b, "mac_per_word": intensity(config, b, L)} for b in INTENSITY_BATCHES],
        "limit": intensity_limit(config, L),
        "limit_vs_context": [{"context": c, "limit": intensity_limit(config, c)}
                             for c in sorted(set(LIMIT_CONTEXTS) | {L})],
    }


def roofline_report(config, programs=None):
    """The chip's roofline (peak rows*cols MAC/cycle, 1 word/cycle from memory) and the measured steps on it.

    ``ceiling`` is min(peak, intensity x 1 word/cycle): what the step could reach if the memory were busy
    all the time; ``achieved`` is MACs / cycles of the real program under the cycle model."""
    programs = programs if programs is not None else measured_programs(config)
    peak = config.rows * config.cols
    points = []
    for p in programs:
        inten = p["macs"] / p["words"]
        points.append({"name": p["name"], "intensity": inten, "achieved": p["macs"] / p["cycles"],
                       "ceiling": min(float(peak), inten * 1.0)})
    # Ridge point: the intensity at which the memory line (1 word/cycle) meets the peak.
    return {"peak": peak, "ridge": peak / 1.0, "points": points}


# -- the commands ---------------------------------------------------------------------------------------------

def _traffic_tables(config, rep, programs):
    L = config.max_ctx
    ww, sw = weight_words(config), sequence_words(config, L)
    lines = [f"words per step at L = {L}: {ww} (weights, once: 3 x {config.d_model} x {config.d}) + {sw} per "
             f"sequence ({config.d_model} + 2 x {L - 1} x {config.d} + 3 x {config.d})",
             f"MACs per sequence: {3 * config.d_model * config.d} (projections, weights shared) + "
             f"{2 * L * config.d} (attention, its own cache)", "",
             "measured from the programs (decode.program, decode.traffic):"]
    rows = []
    for p in programs:
        formula = step_words(config, p["lengths"])
        rows.append([p["name"], f"{p['macs']:,}", f"{p['words']:,}", f"{formula:,}",
                     "yes" if formula == p["words"] else "NO", f"{p['macs'] / p['words']:.2f}"])
    lines.append(table(["program", "MACs", "words", "formula words", "equal", "MAC/word"], rows,
                       ["<", ">", ">", ">", ">", ">"]))
    lines += ["", f"intensity against batch (formula, all sequences at token {L}):"]
    lines.append(table(["batch", "MAC/word"], [[f"{r['batch']:,}", f"{r['mac_per_word']:.2f}"]
                                              for r in rep["intensity"]], [">", ">"]))
    lines += [f"limit as the batch grows: {rep['limit']:.2f} MAC/word at L = {L} "
              f"(ridge point {config.rows * config.cols} MAC/word)", "",
              "the limit against the context length (each cached word feeds one MAC, so it tends to 1):"]
    lines.append(table(["context", "limit MAC/word"], [[f"{r['context']:,}", f"{r['limit']:.3f}"]
                                                      for r in rep["limit_vs_context"]], [">", ">"]))
    return "\n".join(lines)


def plot_intensity(config, rep, programs, path):
    """Intensity against batch size (log x) with its limit, and the measured programs as points."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    L = config.max_ctx
    batches = np.unique(np.round(np.geomspace(1, 4096, 200)).astype(int))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(batches, [intensity(config, int(b), L) for b in batches], color="tab:blue",
            label=f"formula: B x {sequence_macs(config, L)} / ({weight_words(config)} + B x {sequence_words(config, L)})")
    ax.axhline(rep["limit"], color="tab:red", linestyle="--", label=f"limit {rep['limit']:.2f} MAC/word")
    ax.axhline(1.0, color="grey", linestyle=":", label="1 MAC/word (limit as L grows)")
    lock = [p for p in programs if len(set(p["lengths"])) == 1]
    ax.plot([len(p["lengths"]) for p in lock], [p["macs"] / p["words"] for p in lock], "o", color="black",
            label="measured programs (GA-2)")
    ax.set_xscale("log")
    ax.set_xlabel("batch size B (sequences per decode step)")
    ax.set_ylabel("arithmetic intensity (MAC per word)")
    ax.set_title(f"Decode-step intensity against batch (L = {L}, {config.rows}x{config.cols} array; "
                 f"ridge = {config.rows * config.cols})", fontsize=10)
    ax.set_ylim(0, max(rep["limit"], 1.0) * 1.15)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    finish_plot(fig, path)


def plot_roofline(config, rep, path):
    """Log-log roofline: the memory slope up to the ridge, the flat peak, and the measured steps."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    peak, ridge = rep["peak"], rep["ridge"]
    x = np.geomspace(0.1, ridge * 10, 300)
    fig, ax = plt.subplots(figsize=(7, 4.8))
    ax.plot(x, np.minimum(peak, x), color="black", linewidth=2, label="roofline: min(peak, intensity x 1 word/cycle)")
    ax.axvline(ridge, color="grey", linestyle=":", label=f"ridge point {ridge:g} MAC/word")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, p in enumerate(rep["points"]):
        c = colors[i % len(colors)]
        ax.plot(p["intensity"], p["achieved"], "o", color=c,
                label=f"{p['name']}: {p['achieved']:.3f} of {p['ceiling']:.2f} MAC/cycle")
        ax.plot([p["intensity"], p["intensity"]], [p["achieved"], p["ceiling"]], color=c, alpha=0.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (MAC per word moved)")
    ax.set_ylabel("MAC per cycle")
    ax.set_title(f"Roofline of GA-2 ({config.rows}x{config.cols}: peak {peak} MAC/cycle) "
                 f"with measured decode steps", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=7)
    finish_plot(fig, path)


def _run_traffic(args):
    config = config_from_args(args)
    programs = measured_programs(config)
    rep = traffic_report(config, programs)
    print(_traffic_tables(config, rep, programs))
    return emit(args, rep, lambda path: plot_intensity(config, rep, programs, path))


def _run_roofline(args):
    config = config_from_args(args)
    programs = measured_programs(config)
    rep = roofline_report(config, programs)
    print(f"peak {rep['peak']} MAC/cycle ({config.rows}x{config.cols} array); memory 1 word/cycle; "
          f"ridge point {rep['ridge']:g} MAC/word")
    rows = []
    for p, pt in zip(programs, rep["points"]):
        rows.append([pt["name"], f"{p['cycles']:,}", f"{p['macs']:,}", f"{p['words']:,}", f"{pt['intensity']:.2f}",
                     f"{pt['achieved']:.3f}", f"{pt['ceiling']:.2f}", f"{100 * pt['achieved'] / pt['ceiling']:.1f}%"])
    print(table(["program", "cycles", "MACs", "words", "MAC/word", "achieved", "ceiling", "of ceiling"], rows,
                ["<"] + [">"] * 7))
    print("(achieved = MACs / cycles from cycle_counts; ceiling = min(peak, MAC/word x 1 word/cycle))")
    return emit(args, rep, lambda path: plot_roofline(config, rep, path))


def register(sub):
    p = sub.add_parser("traffic", help="words and MACs per decode step, intensity against batch and context",
                       description="Words and MACs of the real batched decode programs, the 768 + 544 B split "
                                   "(on the default configuration) and the intensity against batch and context.")
    add_config_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=_run_traffic)
    p = sub.add_parser("roofline", help="the chip's roofline with the measured decode steps on it",
                       description="Roofline of GA-2 (peak rows x cols MAC/cycle, memory 1 word/cycle) with the "
                                   "decode steps placed by their MAC/word and their MACs per cycle.")
    add_config_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=_run_roofline)
