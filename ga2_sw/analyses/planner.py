"""A capacity planner for decode serving (``ga2 planner``; the chapter's running example A).

For a model (weight bytes, KV-cache bytes per token), a context length and a chip (memory capacity and
bandwidth), all DERIVED arithmetic for ASSUMED chips:

* max batch = floor((capacity - weight bytes) / KV bytes per request), 0 if the weights alone do not fit:
  capacity decides how many requests can be in the batch at all;
* tokens/s at batch B = B x bandwidth / (weight bytes + B x KV bytes per request), shown only where B fits;
* best = tokens/s at the max batch; limit = bandwidth / KV bytes per request, where the curve flattens.

Defaults: a 7B-class model with int8 weights (7e9 bytes) and an int8 cache of 256 KiB per token; chips A
(24 GB, 0.5 TB/s), B (80 GB, 2 TB/s), C (192 GB, 5 TB/s); contexts 2,048, 8,192 and 32,768 tokens.
GB and TB are decimal (1e9, 1e12); the cache is in binary units (KiB, GiB).

The model, chips and contexts are edited with options or with a TOML file (``--config FILE.toml``), whose
schema is (every key optional; a missing one keeps its default; options given on the command line win)::

    weight_bytes = 7e9              # bytes of weights
    kv_bytes_per_token = 262144     # KV-cache bytes per token of context
    contexts = [2048, 8192, 32768]  # tokens per request
    batches = [1, 4, 16, 64]        # batch sizes tabulated

    [[chip]]                        # repeat once per chip; if present, replaces the default chips
    name = "A"
    capacity_gb = 24                # memory capacity, 1e9 bytes
    bandwidth_tb_per_s = 0.5        # memory bandwidth, 1e12 bytes/s
"""

import math
import tomllib
from dataclasses import dataclass

from ..options import Float, InputFile, Int, Parsed
from .common import add_output_arguments, emit, finish_plot, table

__all__ = ["Chip", "DEFAULT_MODEL", "DEFAULT_CHIPS", "DEFAULT_CONTEXTS", "DEFAULT_BATCHES", "max_batch",
           "tokens_per_s", "plan", "parse_chip", "load_toml", "register"]

GB, TB, KiB, GiB = 1e9, 1e12, 2 ** 10, 2 ** 30


@dataclass(frozen=True)
class Chip:
    name: str
    capacity_bytes: float
    bandwidth_bytes_per_s: float

    @property
    def label(self):
        return f"{self.name}: {self.capacity_bytes / GB:g} GB, {self.bandwidth_bytes_per_s / TB:g} TB/s"


DEFAULT_MODEL = {"weight_bytes": 7e9, "kv_bytes_per_token": 2 * 32 * 32 * 128}   # int8 weights and cache
DEFAULT_CHIPS = (Chip("A", 24 * GB, 0.5 * TB), Chip("B", 80 * GB, 2 * TB), Chip("C", 192 * GB, 5 * TB))
DEFAULT_CONTEXTS = (2048, 8192, 32768)
DEFAULT_BATCHES = (1, 4, 16, 64)


def max_batch(capacity_bytes, weight_bytes, kv_bytes_per_request):
    """Requests that fit next to the weights: weights + B x KV <= capacity."""
    free = capacity_bytes - weight_bytes
    return 0 if free < 0 else math.floor(free / kv_bytes_per_request)


def tokens_per_s(batch, bandwidth, weight_bytes, kv_bytes_per_request):
    """Memory-bound speed: each step reads the weights and every cache once, for one token per request."""
    return batch * bandwidth / (weight_bytes + batch * kv_bytes_per_request)


def plan(weight_bytes=DEFAULT_MODEL["weight_bytes"], kv_bytes_per_token=DEFAULT_MODEL["kv_bytes_per_token"],
         chips=DEFAULT_CHIPS, contexts=DEFAULT_CONTEXTS, batches=DEFAULT_BATCHES):
    """One row per (context, chip), contexts outermost (the order the table prints):
    {"chip", "capacity_bytes", "bandwidth_bytes_per_s", "context", "max_batch",
     "tokens_per_s": {"B": x or None when B does not fit}, "best", "limit"}."""
    rows = []
    for ctx in contexts:
        kv = kv_bytes_per_token * ctx
        for chip in chips:
            mb = max_batch(chip.capacity_bytes, weight_bytes, kv)
            bw = chip.bandwidth_bytes_per_s
            rows.append({
                "chip": chip.name, "capacity_bytes": chip.capacity_bytes, "bandwidth_bytes_per_s": bw,
                "context": ctx, "max_batch": mb,
                "tokens_per_s": {str(b): (tokens_per_s(b, bw, weight_bytes, kv) if b <= mb else None)
                                 for b in batches},
                # Nothing fits: the chip serves no one, so its best is 0 tokens/s.
                "best": tokens_per_s(mb, bw, weight_bytes, kv) if mb else 0.0,
                "limit": bw / kv,
            })
    return rows


# -- input: options and TOML ----------------------------------------------------------------------------------

def _number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def parse_chip(text):
    """'NAME:CAPACITY_GB:TBPS' (e.g. 'A:24:0.5') -> Chip; the name may itself contain colons."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0].strip():
        raise ValueError(f"--chip {text!r}: expected NAME:CAPACITY_GB:TBPS, e.g. A:24:0.5")
    name, cap, bw = parts
    try:
        cap_v, bw_v = float(cap), float(bw)
    except ValueError:
        raise ValueError(f"--chip {text!r}: capacity {cap!r} and bandwidth {bw!r} must be numbers "
                         f"(GB and TB/s), e.g. A:24:0.5") from None
    if not (math.isfinite(cap_v) and cap_v > 0 and math.isfinite(bw_v) and bw_v > 0):
        raise ValueError(f"--chip {text!r}: capacity and bandwidth must be positive")
    return Chip(name.strip(), cap_v * GB, bw_v * TB)


_TOP_KEYS = {"weight_bytes", "kv_bytes_per_token", "contexts", "batches", "chip"}
_CHIP_KEYS = {"name", "capacity_gb", "bandwidth_tb_per_s"}


def load_toml(path):
    """Read a planner file (schema in the module docstring). Returns a dict with any of weight_bytes,
    kv_bytes_per_token, contexts, batches, chips. Raises ValueError naming the file and the offending key."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the planner file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None

    def bad(key, what, value):
        return ValueError(f"{path}: key '{key}' must be {what}, not {value!r}")

    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown key '{unknown[0]}' (known: {', '.join(sorted(_TOP_KEYS))})")
    out = {}
    for key in ("weight_bytes", "kv_bytes_per_token"):
        if key in data:
            if not (_number(data[key]) and data[key] > 0):
                raise bad(key, "a positive number", data[key])
            out[key] = float(data[key])
    for key in ("contexts", "batches"):
        if key in data:
            v = data[key]
            if not (isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                                                      for x in v)):
                raise bad(key, "a non-empty list of positive integers", v)
            out[key] = tuple(v)
    if "chip" in data:
        chips = data["chip"]
        if not (isinstance(chips, list) and chips and all(isinstance(c, dict) for c in chips)):
            raise bad("chip", "an array of tables ([[chip]] sections)", chips)
        out["chips"] = []
        for i, c in enumerate(chips):
            where = f"chip[{i}]"
            extra = sorted(set(c) - _CHIP_KEYS)
            if extra:
                raise ValueError(f"{path}: unknown key '{where}.{extra[0]}' (known: {', '.join(sorted(_CHIP_KEYS))})")
            missing = sorted(_CHIP_KEYS - set(c))
            if missing:
                raise ValueError(f"{path}: key '{where}.{missing[0]}' is missing")
            if not (isinstance(c["name"], str) and c["name"].strip()):
                raise bad(f"{where}.name", "a non-empty string", c["name"])
            for key in ("capacity_gb", "bandwidth_tb_per_s"):
                if not (_number(c[key]) and c[key] > 0):
                    raise bad(f"{where}.{key}", "a positive number", c[key])
            out["chips"].append(Chip(c["name"].strip(), c["capacity_gb"] * GB, c["bandwidth_tb_per_s"] * TB))
        out["chips"] = tuple(out["chips"])
    return out


def settings_from_args(args):
    """Defaults, then the TOML file, then the command-line options."""
    s = {"weight_bytes": DEFAULT_MODEL["weight_bytes"], "kv_bytes_per_token": DEFAULT_MODEL["kv_bytes_per_token"],
         "chips": DEFAULT_CHIPS, "contexts": DEFAULT_CONTEXTS, "batches": DEFAULT_BATCHES}
    if args.config:
        s.update(load_toml(args.config))
    if args.weight_bytes is not None:
        if not (math.isfinite(args.weight_bytes) and args.weight_bytes > 0):
            raise ValueError(f"--weight-bytes must be a positive number, not {args.weight_bytes!r}")
        s["weight_bytes"] = args.weight_bytes
    if args.kv_bytes_per_token is not None:
        if not (math.isfinite(args.kv_bytes_per_token) and args.kv_bytes_per_token > 0):
            raise ValueError(f"--kv-bytes-per-token must be a positive number, not {args.kv_bytes_per_token!r}")
        s["kv_bytes_per_token"] = args.kv_bytes_per_token
    if args.chip:
        s["chips"] = tuple(c if isinstance(c, Chip) else parse_chip(c) for c in args.chip)
    if args.context:
        if any(c < 1 for c in args.context):
            raise ValueError(f"--context must be a positive number of tokens, not {min(args.context)}")
        s["contexts"] = tuple(args.context)
    if args.batch:
        if any(b < 1 for b in args.batch):
            raise ValueError(f"--batch must be a positive batch size, not {min(args.batch)}")
        s["batches"] = tuple(args.batch)
    names = [c.name for c in s["chips"]]
    if len(set(names)) != len(names):
        raise ValueError(f"chip names must be unique, got {names}")
    return s


# -- output ---------------------------------------------------------------------------------------------------

def format_tables(settings, rows):
    wb, kvt, batches = settings["weight_bytes"], settings["kv_bytes_per_token"], settings["batches"]
    labels = {c.name: c.label for c in settings["chips"]}
    out = [f"model: weights {wb / GB:.1f} GB, KV cache {kvt / KiB:g} KiB per token (derived arithmetic, assumed chips)",
           "tokens/s = B x BW / (weight bytes + B x KV bytes per request); max batch: weights + B x KV <= capacity"]
    for ctx in settings["contexts"]:
        block = [r for r in rows if r["context"] == ctx]
        out += ["", f"context {ctx:,} tokens: KV cache {kvt * ctx / GiB:.2f} GiB per request"]
        head = ["chip", "max batch"] + [f"B={b}" for b in batches] + ["best tokens/s", "limit"]
        body = [[labels[r["chip"]], f"{r['max_batch']:,}"]
                + [("--" if r["tokens_per_s"][str(b)] is None else f"{r['tokens_per_s'][str(b)]:.0f}") for b in batches]
                + [f"{r['best']:.0f}", f"{r['limit']:.0f}"] for r in block]
        out.append(table(head, body, ["<"] + [">"] * (len(head) - 1)))
    out += ["", "('--': that batch does not fit in memory; best = tokens/s at the max batch; "
                "limit = bandwidth / KV bytes per request, where the curve flattens)"]
    return "\n".join(out)


def _check_plot_context(settings, context):
    if context is not None and context not in settings["contexts"]:
        raise ValueError(f"--plot-context {context} is not one of the planned contexts "
                         f"({', '.join(map(str, settings['contexts']))})")


def plot(settings, rows, path, context=None):
    """Tokens/s against batch per chip, one panel per context (or only ``context``); each curve ends where
    the memory is full, and its dashed line is the limit it would flatten at."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    import numpy as np

    _check_plot_context(settings, context)
    contexts = [context] if context is not None else list(settings["contexts"])
    labels = {c.name: c.label for c in settings["chips"]}
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(1, len(contexts), figsize=(5.2 * len(contexts), 4.4), squeeze=False)
    wb, kvt = settings["weight_bytes"], settings["kv_bytes_per_token"]
    for ax, ctx in zip(axes[0], contexts):
        kv = kvt * ctx
        for i, r in enumerate(r for r in rows if r["context"] == ctx):
            c, mb = colors[i % len(colors)], r["max_batch"]
            ax.axhline(r["limit"], color=c, linestyle="--", linewidth=0.8, alpha=0.7)
            if mb == 0:
                ax.plot([], [], color=c, label=f"{labels[r['chip']]}: does not fit")
                continue
            b = np.unique(np.round(np.geomspace(1, mb, 200)).astype(int))
            ax.plot(b, tokens_per_s(b, r["bandwidth_bytes_per_s"], wb, kv), color=c,
                    label=f"{labels[r['chip']]} (max batch {mb})")
            ax.plot([mb], [r["best"]], "o", color=c)      # the end of the curve: memory full
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _pos: f"{v:,.0f}")      # 600, not 6 x 10^2
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if f"{v:.0e}"[0] in "25" else ""))
        ax.set_xlabel("batch size B (requests)")
        ax.set_ylabel("tokens per second per chip")
        ax.set_title(f"context {ctx:,} tokens ({kv / GiB:.2f} GiB cache per request)", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right", fontsize=7)
    fig.suptitle("Capacity planner (derived): each curve ends where memory is full (dot); "
                 "dashed = limit BW / KV", fontsize=10)
    finish_plot(fig, path)


# What the options take (bytes, tokens, batch sizes; the chips' figures are checked by ``parse_chip``).
WEIGHT_BYTES = Float(1, 1e15)
KV_BYTES_PER_TOKEN = Float(1, 1e12)
CONTEXT = Int(1, 10**8)
BATCH = Int(1, 10**6)


def _check(args):
    _check_plot_context(settings_from_args(args), args.plot_context)


def _run(args):
    settings = settings_from_args(args)
    rows = plan(settings["weight_bytes"], settings["kv_bytes_per_token"], settings["chips"],
                settings["contexts"], settings["batches"])
    print(format_tables(settings, rows))
    return emit(args, {"rows": rows}, lambda path: plot(settings, rows, path, args.plot_context))


def register(sub):
    p = sub.add_parser("planner", help="capacity planner: max batch and tokens/s per chip and context (derived)",
                       description=__doc__.split("\n\n")[0] + " Model, chips and contexts are editable; see "
                                   "the module docstring of ga2_sw.analyses.planner for the TOML schema.")
    p.add_argument("--config", metavar="FILE.toml", type=InputFile(decode=load_toml),
                   help="read model, chips, contexts and batches from a TOML file (keys: weight_bytes, "
                        "kv_bytes_per_token, contexts, batches, [[chip]] name/capacity_gb/bandwidth_tb_per_s)")
    p.add_argument("--chip", action="append", metavar="NAME:CAPACITY_GB:TBPS",
                   type=Parsed(parse_chip, what="NAME:CAPACITY_GB:TBPS"), help="a chip, e.g. A:24:0.5 (repeatable; replaces the default chips A, B, C)")
    p.add_argument("--context", action="append", type=CONTEXT, metavar="TOKENS",
                   help=f"a context length, {CONTEXT.describe()} (repeatable; default 2048, 8192, 32768)")
    p.add_argument("--batch", action="append", type=BATCH, metavar="B",
                   help=f"a batch size to tabulate, {BATCH.describe()} (repeatable; default 1, 4, 16, 64)")
    p.add_argument("--weight-bytes", type=WEIGHT_BYTES, metavar="BYTES",
                   help=f"bytes of weights, {WEIGHT_BYTES.describe()} (default 7e9: 7B int8)")
    p.add_argument("--kv-bytes-per-token", type=KV_BYTES_PER_TOKEN, metavar="BYTES",
                   help=f"KV-cache bytes per token, {KV_BYTES_PER_TOKEN.describe()} (default 262144 = 256 KiB)")
    p.add_argument("--plot-context", type=CONTEXT, metavar="TOKENS",
                   help="plot only this context, one of the planned ones (default: one panel per context)")
    add_output_arguments(p)
    p.set_defaults(func=_run, check=_check)
