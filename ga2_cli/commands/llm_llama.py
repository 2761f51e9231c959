"""``ga2 llm llama-check``: the float reference against llama.cpp (``ga2_sw.llm.llama_check``), an implementation
that shares none of its code, over a text with teacher forcing: top-1 agreement, the largest logit difference,
the mean KL divergence and both perplexities, on the model file itself (llama.cpp rounds each product's inputs to
8 bits there) and on a float32 copy of it (the reference's own arithmetic)."""

import tempfile
from pathlib import Path

from ga2_sw.analyses.common import emit, json_option, table
from ga2_sw.options import InputFile

__all__ = ["add_llama_check"]

WEIGHTS = ("file", "float32")


def _check(args):
    from ga2_sw.llm.files import model_path
    from ga2_sw.llm.gguf_model import requirements as gguf_requirements
    from ga2_sw.llm.llama_check import requirements
    gguf_requirements()
    requirements()
    model_path()


def _run(args):
    from ga2_sw.llm.files import model_path
    from ga2_sw.llm.gguf_model import load
    from ga2_sw.llm.llama_check import compare, float32_copy, float_logits
    from ga2_sw.llm.texts import EVAL_TEXT
    path = model_path()
    model = load(path)
    text = EVAL_TEXT if args.text is None else Path(args.text).read_text(encoding="utf-8")
    ids = model.encode(text)
    if len(ids) < 2:
        raise ValueError(f"--text {args.text}: {len(ids)} token; the comparison needs 2 or more")
    reference = float_logits(model, ids)
    rows = []
    for weights in args.weights:
        if weights == "file":
            rows.append(("the model file (Q4_1; 8-bit inputs to its products)", compare(path, ids, model,
                                                                                         reference)))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            copy = float32_copy(path, Path(tmp) / "float32.gguf")
            rows.append(("a float32 copy of the file", compare(path, ids, model, reference, llama_path=copy)))
    print(f"the float reference against llama.cpp over {len(ids)} tokens of "
          f"{'the shipped text' if args.text is None else args.text}, teacher-forced")
    print(table(["llama.cpp reads", "top-1 agreement", "max |logit diff|", "mean KL (nats)", "perplexity float",
                 "perplexity llama.cpp"],
                [[what, f"{r['top1_agreement']:.2%}", f"{r['max_abs_logit_diff']:.4g}", f"{r['mean_kl']:.3g}",
                  f"{r['perplexity_float']}", f"{r['perplexity_llama']}"] for what, r in rows],
                ["<", ">", ">", ">", ">", ">"]))
    return emit(args, {"tokens": len(ids), "text": args.text, "rows": [{"weights": w, **r} for w, (_, r) in
                                                                       zip(args.weights, rows)]}, None)


def add_llama_check(llm):
    from ga2_sw.options import Names
    p = llm.add_parser("llama-check", help="the float reference against llama.cpp reading the same model file "
                                           "(pip install llama-cpp-python)")
    p.add_argument("--text", metavar="FILE", type=InputFile(), help="compare over this UTF-8 text (default: the "
                                                                     "shipped evaluation text)")
    p.add_argument("--weights", metavar="W,W", type=Names(lambda: WEIGHTS, many=True, what="weights"),
                   default=list(WEIGHTS), help="what llama.cpp reads: file (the model file), float32 (a float32 "
                                               "copy of it); default both")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the figures and every token's")
    p.set_defaults(func=_run, check=_check, plot=None)
