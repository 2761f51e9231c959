"""Time per decode step against batch size and against context length (``ga2 latency``; the talk's two graphs).

The model: a step must both compute and move memory, so it takes at least

    max(compute time, weight fetch + B x KV fetch)

* compute: linear in the batch B with no offset (every weight is one MAC per token, and every cached
  element one MAC per token of attention);
* weight fetch: a constant floor, the time to read all the weights once; it sets the latency at small B;
* KV fetch: linear in B (each request reads its own cache) and in the context length.

Two versions are drawn side by side:

(a) an ASSUMED chip (derived arithmetic): by default the 7B-class model of ``ga2 model7b`` (7e9 int8
    weights, 256 KiB of int8 cache per token, 4,096-token context) on a chip with 1 TB/s of memory and a
    compute peak of 400 TMAC/s (800 TFLOP/s; a ridge point of 400 MAC per byte, a plausible inference
    part). Every figure is an option. With these defaults compute never binds: one request's cache read
    (about 1.07 ms) costs more than its whole compute (about 20 us), so the step stays memory-bound at any
    batch; shrink the cache (--kv-bytes-per-token) or the context to see the compute line take over.

(b) GA-2 from its cycle model: the real programs for B = 1..rows at L = max_ctx and for L = 1..max_ctx at
    B = rows, timed by ``cycles.cycle_counts``, next to the same lines in GA-2 units: compute = MACs /
    (rows x cols) cycles, weight fetch = weight words, KV = the per-sequence words of the traffic formula,
    at 1 word per cycle. How far the measured cycles sit above max(...) is what running one instruction at
    a time costs.

JSON units: seconds for the assumed chip, cycles for GA-2.
"""

from .. import cycles, decode
from ..cli import add_config_arguments, config_from_args
from ..isa import Err
from ..options import Float, Int
from .common import add_output_arguments, emit, finish_plot, table
from .traffic import sequence_words, weight_words

__all__ = ["ASSUMED", "assumed_step", "assumed_curves", "compute_binds_from", "ga2_curves", "analyse", "register"]

ASSUMED = {
    "params": 7e9,                   # weights
    "bytes_per_weight": 1.0,         # int8 weights
    "kv_bytes_per_token": 262144.0,  # 2 x 32 layers x 32 heads x 128, int8
    "kv_bytes_per_element": 1.0,     # int8 cache: one MAC per cached byte
    "context": 4096,
    "bandwidth": 1e12,               # bytes/s
    "macs_per_s": 400e12,            # compute peak (an assumption; 800 TFLOP/s)
    "batch": 16,                     # the batch of the against-context graph
}
ASSUMED_BATCHES = tuple(2 ** k for k in range(11))              # 1 .. 1024
ASSUMED_CONTEXTS = tuple(2 ** k for k in range(7, 16))          # 128 .. 32768


def assumed_step(batch, context, params, bytes_per_weight, kv_bytes_per_token, kv_bytes_per_element,
                 bandwidth, macs_per_s):
    """(compute, weights, kv, bound) seconds of one decode step on the assumed chip."""
    macs_per_token = params + context * kv_bytes_per_token / kv_bytes_per_element
    compute = batch * macs_per_token / macs_per_s
    weights = params * bytes_per_weight / bandwidth
    kv = batch * context * kv_bytes_per_token / bandwidth
    return compute, weights, kv, max(compute, weights + kv)


def _chip(p):
    return {k: p[k] for k in ("params", "bytes_per_weight", "kv_bytes_per_token", "kv_bytes_per_element",
                              "bandwidth", "macs_per_s")}


def assumed_curves(p, batches=ASSUMED_BATCHES, contexts=ASSUMED_CONTEXTS):
    """{"vs_batch": [{"batch", "compute", "weights", "kv", "bound"}] at p["context"],
        "vs_context": [{"context", ...}] at p["batch"]}, seconds."""
    keys = ("compute", "weights", "kv", "bound")
    vb = [{"batch": b, **dict(zip(keys, assumed_step(b, p["context"], **_chip(p))))} for b in batches]
    vc = [{"context": c, **dict(zip(keys, assumed_step(p["batch"], c, **_chip(p))))} for c in contexts]
    return {"vs_batch": vb, "vs_context": vc}


def compute_binds_from(p):
    """The smallest batch at which compute exceeds the memory time at p["context"], or None if never.

    compute = B a, memory = W + B k: compute wins for B > W / (a - k), and only if a > k, i.e. one request's
    compute outlasts its cache read."""
    a, w, k, _ = assumed_step(1, p["context"], **_chip(p))
    if a <= k:
        return None
    b = w / (a - k)
    return int(b) + 1


def ga2_curves(config, seed=1):
    """GA-2 measured and modelled, in cycles: {"vs_batch": [{"batch", "cycles", "compute", "weights", "kv",
    "bound"}] for B = 1..rows at max_ctx, "vs_context": [{"context", ...}] for L = 1..max_ctx at B = rows}."""
    P = decode.rq_params(decode.make_workload(config, 1, 1, seed))    # timing does not depend on the data
    peak = config.rows * config.cols

    def point(lengths):
        prog = decode.program(config, list(range(len(lengths))), list(lengths), P)
        counters, err, pc = cycles.cycle_counts(prog, config)
        if err != Err.NONE:
            raise RuntimeError(f"decode step {list(lengths)} faults with {err.name} at pc {pc}")
        macs, _ = decode.traffic(prog)
        compute = macs / peak
        weights = weight_words(config)
        kv = sum(sequence_words(config, L) for L in lengths)
        return {"cycles": counters.cycles, "compute": compute, "weights": weights, "kv": kv,
                "bound": max(compute, weights + kv)}

    L, R = config.max_ctx, config.rows
    return {"vs_batch": [{"batch": b, **point([L] * b)} for b in range(1, R + 1)],
            "vs_context": [{"context": c, **point([c] * R)} for c in range(1, L + 1)]}


def analyse(config, assumed=None):
    p = dict(ASSUMED, **(assumed or {}))
    _validate(p)
    return {"assumed": assumed_curves(p), "ga2": ga2_curves(config)}


def _validate(p):
    for key, value in p.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"--{key.replace('_', '-')} must be a positive number, not {value!r}")
    for key in ("context", "batch"):
        if int(p[key]) != p[key]:
            raise ValueError(f"--{key} must be a whole number, not {p[key]!r}")


# -- output ---------------------------------------------------------------------------------------------------

def format_report(config, p, result):
    ms = lambda s: f"{1e3 * s:.3f}"
    out = [f"(a) ASSUMED chip (derived): {p['params'] / 1e9:g}e9 weights x {p['bytes_per_weight']:g} B, "
           f"{p['kv_bytes_per_token'] / 1024:g} KiB cache per token, {p['bandwidth'] / 1e12:g} TB/s, "
           f"{p['macs_per_s'] / 1e12:g} TMAC/s",
           "step time = max(compute, weight fetch + B x KV fetch), in ms", "",
           f"against batch, context {int(p['context']):,} tokens:"]
    for name, key, label in (("vs_batch", "batch", "batch"), ("vs_context", "context", "context")):
        if name == "vs_context":
            out += ["", f"against context, batch {int(p['batch'])}:"]
        rows = [[f"{r[key]:,}", ms(r["compute"]), ms(r["weights"]), ms(r["kv"]), ms(r["weights"] + r["kv"]),
                 ms(r["bound"]), "compute" if r["compute"] > r["weights"] + r["kv"] else "memory"]
                for r in result["assumed"][name]]
        out.append(table([label, "compute", "weights", "KV", "weights+KV", "step", "bound by"], rows,
                         [">"] * 6 + ["<"]))
    b = compute_binds_from(p)
    out.append("compute binds from batch " + f"{b:,}" if b else
               "compute never binds: one request's cache read outlasts its compute, at any batch")
    out += ["", f"(b) GA-2 ({config.rows}x{config.cols}, 1 word/cycle): cycles of the real programs "
                f"(cycle_counts) against the model max(compute, weights + KV), in cycles", "",
            f"against batch, all at token {config.max_ctx}:"]
    for name, key, label in (("vs_batch", "batch", "batch"), ("vs_context", "context", "context")):
        if name == "vs_context":
            out += ["", f"against context, batch {config.rows}:"]
        rows = [[f"{r[key]}", f"{r['cycles']:,}", f"{r['compute']:,.0f}", f"{r['weights']:,}", f"{r['kv']:,}",
                 f"{r['bound']:,.0f}", f"{r['cycles'] / r['bound']:.2f}x"] for r in result["ga2"][name]]
        out.append(table([label, "cycles", "compute", "weights", "KV", "bound", "cycles/bound"], rows,
                         [">"] * 7))
    return "\n".join(out)


def plot(config, p, result, path):
    """2 x 2: (assumed chip, GA-2) x (against batch, against context)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    plain = FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}")   # 1,024 rather than 2^10
    # 16K rather than 16,384: the context axis has nine ticks to fit.
    kfmt = FuncFormatter(lambda v, _pos: f"{v / 1024:g}K" if v >= 1024 and v % 1024 == 0 else f"{v:g}")
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels = [
        (axes[0][0], result["assumed"]["vs_batch"], "batch", 1e3, "ms",
         f"assumed chip: against batch (context {int(p['context']):,})", "batch size B", True),
        (axes[0][1], result["assumed"]["vs_context"], "context", 1e3, "ms",
         f"assumed chip: against context (batch {int(p['batch'])})", "context length (tokens)", True),
        (axes[1][0], result["ga2"]["vs_batch"], "batch", 1, "cycles",
         f"GA-2 {config.rows}x{config.cols}: against batch (context {config.max_ctx})", "batch size B", False),
        (axes[1][1], result["ga2"]["vs_context"], "context", 1, "cycles",
         f"GA-2 {config.rows}x{config.cols}: against context (batch {config.rows})", "context length (tokens)",
         False),
    ]
    for ax, rows, key, scale, unit, title, xlabel, log in panels:
        x = [r[key] for r in rows]
        ax.plot(x, [scale * r["compute"] for r in rows], ":", color="tab:green", label="compute")
        ax.plot(x, [scale * r["weights"] for r in rows], "-.", color="tab:blue", label="weight fetch (floor)")
        ax.plot(x, [scale * r["kv"] for r in rows], "--", color="tab:orange", label="KV fetch")
        ax.plot(x, [scale * (r["weights"] + r["kv"]) for r in rows], "-", color="tab:purple", linewidth=1,
                label="weights + KV")
        ax.plot(x, [scale * r["bound"] for r in rows], "-", color="black", linewidth=2.5, alpha=0.6,
                label="max(compute, weights + KV)")
        if "cycles" in rows[0]:
            ax.plot(x, [r["cycles"] for r in rows], "o-", color="tab:red", markersize=4,
                    label="GA-2 measured (cycle_counts)")
            ax.set_ylim(0, None)
        if log:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(kfmt)
            ax.yaxis.set_major_formatter(plain)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"time per decode step ({unit})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Time per decode step = max(compute, weight fetch + B x KV fetch): "
                 "derived for an assumed chip (top), measured on GA-2 (bottom)", fontsize=11)
    finish_plot(fig, path)


def _assumed_from_args(args):
    p = dict(ASSUMED)
    for key in ("params", "bytes_per_weight", "kv_bytes_per_token", "kv_bytes_per_element", "context",
                "bandwidth", "batch"):
        if getattr(args, key) is not None:
            p[key] = getattr(args, key)
    if args.flops is not None and args.macs_per_s is not None:
        raise ValueError("give either --flops or --macs-per-s, not both")
    if args.flops is not None:
        p["macs_per_s"] = args.flops / 2          # one MAC is two floating-point operations
    elif args.macs_per_s is not None:
        p["macs_per_s"] = args.macs_per_s
    return p


def _run(args):
    config = config_from_args(args)
    p = _assumed_from_args(args)
    result = analyse(config, p)
    print(format_report(config, p, result))
    return emit(args, result, lambda path: plot(config, p, result, path))


def register(sub):
    p = sub.add_parser("latency", help="time per decode step against batch and context (assumed chip and GA-2)",
                       description="The talk's two graphs: step time = max(compute, weight fetch + B x KV fetch) "
                                   "against batch size and against context length, derived for an assumed chip "
                                   "and measured on GA-2's cycle model.")
    a = p.add_argument_group("assumed chip (defaults: 7B int8 model, 1 TB/s, 400 TMAC/s)")
    for option, metavar, text in (
            ("--params", "N", f"weights (default {ASSUMED['params']:g})"),
            ("--bytes-per-weight", "BYTES", "bytes per weight (default 1: int8)"),
            ("--kv-bytes-per-token", "BYTES", "KV-cache bytes per token (default 262144 = 256 KiB)"),
            ("--kv-bytes-per-element", "BYTES", "bytes per cached element, each used in one MAC (default 1: int8)"),
            ("--context", "TOKENS", "context of the against-batch graph (default 4096)"),
            ("--batch", "B", "batch of the against-context graph (default 16)"),
            ("--bandwidth", "BYTES_PER_S", "memory bandwidth, bytes/s (default 1e12)"),
            ("--macs-per-s", "MACS", "compute peak, MAC/s (default 4e14)"),
            ("--flops", "FLOPS", "compute peak as FLOP/s (2 per MAC), instead of --macs-per-s")):
        v = LIMITS[option]
        a.add_argument(option, type=v, metavar=metavar, help=f"{text}; {v.describe()}")
    add_config_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=_run, check=_check)


# What each assumed-chip option takes.
LIMITS = {
    "--params": Float(1, 1e15), "--bytes-per-weight": Float(0, 64, lo_open=True),
    "--kv-bytes-per-token": Float(1, 1e12), "--kv-bytes-per-element": Float(0, 64, lo_open=True),
    "--context": Int(1, 10**8), "--batch": Int(1, 10**6), "--bandwidth": Float(1, 1e18),
    "--macs-per-s": Float(1, 1e21), "--flops": Float(2, 2e21),
}


def _check(args):
    _assumed_from_args(args)
