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

from ga2_sw import cycles, decode
from ga2_sw.config import Config
from ga2_sw.cli import add_config_arguments, config_from_args
from ga2_sw.isa import Err
from ga2_sw.options import Float, Int, IntList, Names
from ga2_sw.analyses.common import add_output_arguments, emit, finish_plot, table
from ga2_sw.analyses.traffic import sequence_words, weight_words

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


# -- measured: the long-context steps of the chips with the online unit ------------------------------------

MEASURED_CONTEXTS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
MEASURED_CHIPS = (4, 8)
MEASURED_MODES = ("inorder", "decoupled")
MEASURED_BATCH_CONTEXT = 256      # the against-batch graph's context: a real head's KV passes its weights there


def study_config(config, size, mode, contexts):
    """The chip of one panel of the measured study: ``size`` x ``size``, ``mode``, the online unit, the
    context's memories (the cycle model needs no image; the sizes only have to hold the steps)."""
    # Four banks per array column: a slice's keys are a cache row (d words) apart and must sit on distinct
    # banks (docs/LONG_CONTEXT.md: on 8 banks the 4 x 4's step is 1.39 x its bound, on 16 1.01 x).
    return config.replace(rows=size, cols=size, mode=mode, online_unit=1, max_ctx=max(contexts),
                          sp_banks=4 * size).with_largest_memories()


def _step(config, lengths):
    """(program, cycle-model counters) of a decode step of sequences at ``lengths`` (the timing does not
    depend on the data: the requantisation parameters are placeholders)."""
    from ga2_sw.online_decode import TIMING_PARAMS
    prog = decode.program(config, list(range(len(lengths))), list(lengths), TIMING_PARAMS)
    counters, err, pc = cycles.cycle_counts(prog, config)
    if err != Err.NONE:
        raise RuntimeError(f"decode step {list(lengths)} faults with {err.name} at pc {pc}")
    return prog, counters


def _point(config, lengths):
    prog, counters = _step(config, lengths)
    macs, words = decode.traffic(prog)
    compute = macs / (config.rows * config.cols)
    weights = weight_words(config)
    kv = sum(sequence_words(config, L) for L in lengths)
    return {"cycles": counters.cycles, "compute": compute, "weights": weights, "kv": kv, "words": words,
            "bound": max(compute, weights + kv)}


def crossings(config, panel, batch_context):
    """Where the KV term overtakes the weights term, at batch ``rows`` against context and at ``batch_context``
    against batch. Analytic: the traffic formula, ``B x sequence_words(L) >= weight_words``. Measured: the step
    times themselves, fitted as ``a + b x`` (least squares over the points; the KV part grows linearly with the
    context and with the batch, the rest does not): the part that grows overtakes the part that does not at
    ``x = a / b``. On a chip that runs at its bound the two agree; one that runs its weights or its caches slower
    than the bound moves the measured point."""
    import numpy as np
    W = weight_words(config)

    def fitted(points, key):
        x = np.array([p[key] for p in points], dtype=float)
        y = np.array([p["cycles"] for p in points], dtype=float)
        if len(x) < 2:
            return None
        slope, intercept = np.polyfit(x, y, 1)
        return round(float(intercept / slope), 1) if slope > 0 and intercept > 0 else None
    return {"weights_words": W,
            "context_analytic": next((L for L in range(1, 1 << 20) if config.rows * sequence_words(config, L) >= W),
                                     None),
            "context_measured": fitted(panel["vs_context"], "context"),
            "batch_analytic": next((B for B in range(1, config.rows + 1)
                                    if B * sequence_words(config, batch_context) >= W), None),
            "batch_measured": fitted(panel["vs_batch"], "batch")}


def measured_study(config, chips=MEASURED_CHIPS, modes=MEASURED_MODES, contexts=MEASURED_CONTEXTS,
                   batch_context=MEASURED_BATCH_CONTEXT, progress=None):
    """``{"panels": [{"rows", "cols", "mode", "vs_batch", "vs_context", "crossings"}]}``: for each chip and mode,
    the cycle model's cycles of the long-context decode step for B = 1..rows at ``batch_context`` and for each
    context at B = rows, beside the analytic terms (GA-2 units: cycles at one word and rows x cols MACs a cycle)."""
    tick = progress or (lambda: None)
    panels = []
    for size in chips:
        for mode in modes:
            cfg = study_config(config, size, mode, list(contexts) + [batch_context])
            vs_batch = []
            for b in range(1, size + 1):
                vs_batch.append({"batch": b, **_point(cfg, [batch_context] * b)})
                tick()
            vs_context = []
            for L in contexts:
                vs_context.append({"context": L, **_point(cfg, [L] * size)})
                tick()
            panel = {"rows": size, "cols": size, "mode": mode, "d": cfg.d, "d_model": cfg.d_model,
                     "sp_banks": cfg.sp_banks, "vs_batch": vs_batch, "vs_context": vs_context}
            panel["crossings"] = crossings(cfg, panel, batch_context)
            panels.append(panel)
    return {"contexts": list(contexts), "batch_context": batch_context, "panels": panels}


def verilator_samples(config, study, per_panel, seed=1, sim="verilator"):
    """Run ``per_panel`` points of each panel (the shortest context, the longest, then between) on ``sim``:
    each must leave the reference machine's memories and the cycle model's counters. Returns the checked
    points ``[{"rows", "mode", "lengths", "cycles", "matches"}]``."""
    from sim.backends import get_backend
    from sim.compare import compare_results
    from ga2_sw import online_decode
    from ga2_sw.machine import Machine
    out = []
    for panel in study["panels"]:
        cfg = study_config(config, panel["rows"], panel["mode"], study["contexts"] + [study["batch_context"]])
        contexts = study["contexts"]
        order = [contexts[0], contexts[-1]] + [L for L in contexts[1:-1]]
        for L in order[:per_panel]:
            lengths = [L] * panel["rows"]
            seqs = list(range(len(lengths)))
            # The step on a chip whose memories fit it (the harness holds the whole image).
            small = online_decode.sized_config(cfg.replace(max_ctx=L), lengths)
            w = decode.make_workload(small, len(lengths), L, seed)
            P = decode.rq_params(w)
            prog = decode.program(small, seqs, lengths, P)
            ext = online_decode.ext_image(w, P, seqs, lengths)
            model = cycles.cycle_counts(prog, small)[0]
            (got,) = get_backend(sim).run_many(small, [(prog, ext)], cycle_limit=model.cycles + 10_000)
            want = Machine(small).run(prog, ext)
            out.append({"rows": panel["rows"], "mode": panel["mode"], "lengths": lengths, "cycles": got.counters.cycles,
                        "model_cycles": model.cycles,
                        "matches": not compare_results(want, got) and got.counters == model})
    return out


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


def format_measured(study, samples):
    out = []
    for p in study["panels"]:
        out += ["", f"GA-2 {p['rows']}x{p['cols']} {p['mode']} ({p['sp_banks']} banks, online unit), one head d = {p['d']}, "
                    f"d_model = {p['d_model']}: cycles of the decode step (cycle_counts) against "
                    f"max(compute, weights + KV), in cycles"]
        for name, key, label, title in (("vs_batch", "batch", "batch", f"against batch, all at token "
                                         f"{study['batch_context']:,}"),
                                        ("vs_context", "context", "context", f"against context, batch {p['rows']}")):
            rows = [[f"{r[key]:,}", f"{r['cycles']:,}", f"{r['compute']:,.0f}", f"{r['weights']:,}", f"{r['kv']:,}",
                     f"{r['bound']:,.0f}", f"{r['cycles'] / r['bound']:.3f}x"] for r in p[name]]
            out += [title, table([label, "cycles", "compute", "weights", "KV", "bound", "cycles/bound"], rows,
                                 [">"] * 7)]
        c = p["crossings"]
        fmt = lambda v: "never" if v is None else f"{v:,}"
        out.append(f"KV overtakes the weights ({c['weights_words']:,} words): at batch {p['rows']} from context "
                   f"{fmt(c['context_analytic'])} (formula) / {fmt(c['context_measured'])} (measured, a + b L); at context "
                   f"{study['batch_context']:,} from batch {fmt(c['batch_analytic'])} / {fmt(c['batch_measured'])}")
    if samples:
        ok = sum(s["matches"] for s in samples)
        out += ["", f"verilator: {ok} of {len(samples)} sampled steps leave the reference machine's memories and "
                    f"the cycle model's counters"]
        out.append(table(["chip", "mode", "lengths", "cycles", "= model"],
                         [[f"{s['rows']}x{s['rows']}", s["mode"], f"{s['lengths'][0]:,} x {len(s['lengths'])}",
                           f"{s['cycles']:,}", "yes" if s["matches"] else "NO"] for s in samples], ["<", "<", ">", ">", "<"]))
    return "\n".join(out)


def plot_measured(study, path):
    """One row per chip: against batch, against context; both modes measured, the analytic terms."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    chips = sorted({p["rows"] for p in study["panels"]})
    fig, axes = plt.subplots(len(chips), 2, figsize=(12, 4.3 * len(chips)), squeeze=False)
    styles = {"inorder": ("s--", "tab:red"), "decoupled": ("o-", "tab:green")}
    for row, size in enumerate(chips):
        panels = [p for p in study["panels"] if p["rows"] == size]
        for col, (name, key, xlabel) in enumerate((("vs_batch", "batch", "batch size B"),
                                                    ("vs_context", "context", "context length (tokens)"))):
            ax = axes[row][col]
            ref = panels[0][name]
            x = [r[key] for r in ref]
            ax.plot(x, [r["weights"] for r in ref], "-.", color="tab:blue", label="weights term")
            ax.plot(x, [r["kv"] for r in ref], "--", color="tab:orange", label="KV term (B x caches)")
            ax.plot(x, [r["compute"] for r in ref], ":", color="0.4", label="compute term")
            ax.plot(x, [r["bound"] for r in ref], "-", color="black", linewidth=2.5, alpha=0.5,
                    label="max(compute, weights + KV)")
            for p in panels:
                fmt, colour = styles.get(p["mode"], ("x-", "tab:purple"))
                ax.plot([r[key] for r in p[name]], [r["cycles"] for r in p[name]], fmt, color=colour, markersize=4,
                        label=f"GA-2 {p['mode']} (measured)")
            at_bound = next((p for p in panels if p["mode"] == "decoupled"), panels[0])      # runs at its bound
            c = at_bound["crossings"]
            cross = c["batch_measured"] if name == "vs_batch" else c["context_measured"]
            if cross is not None:
                ax.axvline(cross, color="tab:orange", linewidth=0.8, alpha=0.6)
            if name == "vs_context":
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
            ax.set_yscale("log")
            if name == "vs_batch":
                ax.set_xticks(x)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
            ax.set_xlabel(xlabel)
            ax.set_ylabel("cycles per decode step")
            ax.set_title(f"GA-2 {size}x{size}, d = {panels[0]['d']}, d_model = {panels[0]['d_model']}: "
                         + (f"against batch (context {study['batch_context']:,})" if name == "vs_batch"
                            else f"against context (batch {size})"), fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Time per decode step, measured on GA-2's long-context programs: the KV term overtakes the "
                 "weights (the orange line: where, fitted to the decoupled chip's times)", fontsize=11)
    finish_plot(fig, path)


def _run_measured(args):
    from ga2_sw.analyses.common import progress_bar
    config = config_from_args(args)
    chips, modes, contexts = args.sizes, args.modes, args.contexts
    total = sum(size + len(contexts) for size in chips) * len(modes)
    bar = progress_bar(total, args.no_progress, "step")
    study = measured_study(config, chips, modes, contexts, args.batch_context, progress=lambda: bar.update(1))
    bar.close()
    samples = verilator_samples(config, study, args.verilator, sim=args.sim) if args.verilator else []
    print(format_measured(study, samples))
    result = {**study, "samples": samples}
    emit(args, result, lambda path: plot_measured(study, path))
    return 0 if all(s["matches"] for s in samples) else 1


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
    if args.measured:
        return _run_measured(args)
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
    m = p.add_argument_group("measured: the long-context decode steps of chips with the online unit")
    m.add_argument("--measured", action="store_true",
                   help="instead of the two models: the cycle model's step times on each chip and mode, contexts up "
                        "to 4,096, batches up to rows, against max(compute, weights + KV), and where KV overtakes "
                        "the weights (use --d 64 --d-model 256 for a real head)")
    m.add_argument("--sizes", metavar="N,N", type=IntList(2, 16), default=list(MEASURED_CHIPS),
                   help="array sizes N (N x N; 2..16), default 4,8")
    m.add_argument("--modes", metavar="M,M", type=Names(lambda: MEASURED_MODES, many=True, what="mode"),
                   default=MEASURED_MODES,
                   help="inorder, decoupled or both (default both)")
    m.add_argument("--contexts", metavar="L,L,...", type=IntList(1, Config.field_range("max_ctx")[1]),
                   default=list(MEASURED_CONTEXTS), help="contexts of the against-context graph, the longest also "
                                                         "the against-batch graph's (default 16,32,...,4096)")
    m.add_argument("--batch-context", metavar="L", type=Int(1, Config.field_range("max_ctx")[1]),
                   default=MEASURED_BATCH_CONTEXT, help="context of the against-batch graph (default %(default)s)")
    m.add_argument("--verilator", metavar="N", type=Int(0, 5), default=0,
                   help="run N steps of each chip and mode on --sim too (0..5; default 0)")
    m.add_argument("--sim", choices=("verilator", "pysim", "icarus"), default="verilator",
                   help="the simulator of --verilator's samples (default verilator)")
    m.add_argument("--no-progress", action="store_true", help="no progress bar")
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
    if args.measured:
        if args.verilator:
            from sim.backends import get_backend
            get_backend(args.sim).require()
        if sorted(set(args.contexts)) != list(args.contexts):
            raise ValueError("--contexts: distinct lengths in increasing order")
    elif (args.verilator or list(args.sizes) != list(MEASURED_CHIPS) or list(args.contexts) != list(MEASURED_CONTEXTS)
          or args.batch_context != MEASURED_BATCH_CONTEXT):
        raise ValueError("--sizes, --contexts, --batch-context and --verilator go with --measured")
