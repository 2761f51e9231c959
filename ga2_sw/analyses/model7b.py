"""Derived decode throughput of a 7B-class model on an ASSUMED memory-bound chip (``ga2 model7b``).

This is arithmetic, not a measurement. A decode step reads every weight once and every request's KV cache
once, so a chip with memory bandwidth BW produces

    tokens/s = B x BW / (weight bytes + B x KV bytes per request)

for a batch of B requests, ignoring compute and every overhead. Defaults (the chapter's): 7e9 weights, an
int8 KV cache of 2 (K and V) x 32 layers x 32 heads x 128 dims = 256 KiB per token, a 4,096-token context
(1.07e9 bytes per request) and 1 TB/s. The weights are tried as fp16, int8 and int4.

Two facts fall out: at batch 1 the speed is set by the weight bytes (halving them doubles it), and as the
batch grows every format flattens at the same limit BW / KV bytes per request, because the cache reads do
not amortise over the batch.
"""

from ..options import Float, Int, IntList
from .common import add_output_arguments, emit, finish_plot, table

__all__ = ["DEFAULTS", "WEIGHT_FORMATS", "tokens_per_s", "analyse", "to_json", "register"]

DEFAULTS = {
    "params": 7e9,                          # weights of the model
    "kv_bytes_per_token": 2 * 32 * 32 * 128,  # K and V, 32 layers, 32 heads of 128, int8: 256 KiB
    "context": 4096,                        # tokens in each request's cache
    "bandwidth": 1e12,                      # bytes per second
    "batches": (1, 4, 16, 64, 256),
}

# Bytes per weight of each format the table compares.
WEIGHT_FORMATS = (("fp16", 2.0), ("int8", 1.0), ("int4", 0.5))


def tokens_per_s(batch, weight_bytes, kv_bytes_per_request, bandwidth):
    """Memory-bound tokens per second per chip: one step reads the weights once and each cache once, and
    produces one token per request in the batch."""
    return batch * bandwidth / (weight_bytes + batch * kv_bytes_per_request)


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    return value


def analyse(params=DEFAULTS["params"], kv_bytes_per_token=DEFAULTS["kv_bytes_per_token"],
            context=DEFAULTS["context"], bandwidth=DEFAULTS["bandwidth"], batches=DEFAULTS["batches"]):
    """The table as data: one row per weight format, plus the cache-bound limit.

    Each row: {"weights", "weight_bytes", "tokens_per_s": {"B": x}, "cache_equals_weights_at"}; the last is
    the batch at which B x cache bytes equals the weight bytes, past which the cache dominates the traffic."""
    _positive("--params", params)
    _positive("--kv-bytes-per-token", kv_bytes_per_token)
    _positive("--bandwidth", bandwidth)
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise ValueError(f"--context must be a positive whole number of tokens, not {context!r}")
    if not batches or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batches):
        raise ValueError(f"--batches must be positive whole numbers, not {list(batches)!r}")
    kv = kv_bytes_per_token * context
    rows = []
    for name, bytes_per_weight in WEIGHT_FORMATS:
        wb = params * bytes_per_weight
        rows.append({"weights": name, "weight_bytes": wb,
                     "tokens_per_s": {str(b): tokens_per_s(b, wb, kv, bandwidth) for b in batches},
                     "cache_equals_weights_at": wb / kv})
    return {"params": params, "kv_bytes_per_token": kv_bytes_per_token, "context": context,
            "bandwidth": bandwidth, "kv_bytes_per_request": kv, "batches": list(batches), "rows": rows,
            "limit": bandwidth / kv}


def to_json(result):
    """The documented JSON: {"rows": [{"weights", "tokens_per_s"}], "limit"}."""
    return {"rows": [{"weights": r["weights"], "tokens_per_s": r["tokens_per_s"]} for r in result["rows"]],
            "limit": result["limit"]}


def format_table(result):
    head = ["weights", "bytes"] + [f"B={b}" for b in result["batches"]] + ["cache = weights at B"]
    rows = [[r["weights"], f"{r['weight_bytes'] / 1e9:.1f} GB"]
            + [f"{r['tokens_per_s'][str(b)]:.0f}" for b in result["batches"]]
            + [f"{r['cache_equals_weights_at']:.1f}"] for r in result["rows"]]
    return "\n".join([
        f"derived, not measured: {result['params'] / 1e9:g}e9 weights; KV cache {result['kv_bytes_per_token'] / 1024:g} KiB "
        f"per token x {result['context']:,} tokens = {result['kv_bytes_per_request'] / 1e9:.2f} GB per request; "
        f"ASSUMED chip with {result['bandwidth'] / 1e12:g} TB/s, memory-bound, no overheads",
        "tokens/s per chip = B x BW / (weight bytes + B x cache bytes per request)", "",
        table(head, rows, ["<", ">"] + [">"] * (len(head) - 2)), "",
        f"upper limit as B grows (cache-bound, any weight format): {result['limit']:.0f} tokens/s per chip"])


def plot(result, path):
    """Tokens/s against batch (log x) per weight format, with the cache-bound limit."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    kv, bw = result["kv_bytes_per_request"], result["bandwidth"]
    top = max(1024, 4 * max(result["batches"]))
    b = np.geomspace(1, top, 300)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in result["rows"]:
        line, = ax.plot(b, tokens_per_s(b, r["weight_bytes"], kv, bw), label=f"{r['weights']} weights "
                        f"({r['weight_bytes'] / 1e9:.1f} GB)")
        pts = result["batches"]
        ax.plot(pts, [r["tokens_per_s"][str(x)] for x in pts], "o", color=line.get_color(), markersize=4)
    ax.axhline(result["limit"], color="black", linestyle="--",
               label=f"limit BW / cache per request = {result['limit']:.0f} tokens/s")
    ax.set_xscale("log")
    ax.set_xlabel("batch size B (requests per decode step)")
    ax.set_ylabel("tokens per second per chip")
    ax.set_title(f"Derived: {result['params'] / 1e9:g}B-parameter model, {result['kv_bytes_per_token'] / 1024:g} KiB/token "
                 f"x {result['context']:,}-token cache,\n"
                 f"{result['bandwidth'] / 1e12:g} TB/s (assumed chip)", fontsize=10)
    ax.set_ylim(0, result["limit"] * 1.1)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    finish_plot(fig, path)


# What the options take.
PARAMS = Float(1, 1e15)
KV_BYTES_PER_TOKEN = Float(1, 1e12)
CONTEXT = Int(1, 10**8)
BANDWIDTH = Float(1, 1e18)
BATCHES = IntList(1, 10**6)


def _run(args):
    result = analyse(params=args.params, kv_bytes_per_token=args.kv_bytes_per_token, context=args.context,
                     bandwidth=args.bandwidth, batches=args.batches)
    print(format_table(result))
    return emit(args, to_json(result), lambda path: plot(result, path))


def register(sub):
    p = sub.add_parser("model7b", help="derived tokens/s of a 7B-class model on an assumed memory-bound chip",
                       description="Derived (not measured) decode throughput B x BW / (weights + B x cache) for "
                                   "fp16, int8 and int4 weights of a 7B-class model.")
    p.add_argument("--params", type=PARAMS, default=DEFAULTS["params"], metavar="N",
                   help=f"number of weights, {PARAMS.describe()} (default %(default)g)")
    p.add_argument("--kv-bytes-per-token", type=KV_BYTES_PER_TOKEN, default=DEFAULTS["kv_bytes_per_token"],
                   metavar="BYTES", help=f"KV-cache bytes per token of context, {KV_BYTES_PER_TOKEN.describe()} "
                                         f"(default %(default)g = 256 KiB)")
    p.add_argument("--context", type=CONTEXT, default=DEFAULTS["context"], metavar="TOKENS",
                   help=f"context length in tokens, {CONTEXT.describe()} (default %(default)s)")
    p.add_argument("--bandwidth", type=BANDWIDTH, default=DEFAULTS["bandwidth"], metavar="BYTES_PER_S",
                   help=f"memory bandwidth in bytes/s, {BANDWIDTH.describe()} (default %(default)g)")
    p.add_argument("--batches", default=",".join(map(str, DEFAULTS["batches"])), type=BATCHES, metavar="B,B",
                   help=f"comma-separated batch sizes for the table, each {BATCHES.describe()} (default %(default)s)")
    add_output_arguments(p)
    p.set_defaults(func=_run)
