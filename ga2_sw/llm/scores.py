"""How big real attention logits get: SmolLM2-135M's q.k / sqrt(d) over fixed prompts, per layer, against the
score ranges of GA-2's two softmax paths: the chapter's int8 scores in 1/16 logit (+-7.94) and the long-context
path's 16-bit scores in 1/64 logit (+-512, docs/LONG_CONTEXT.md)."""

import numpy as np

from .float_model import FloatModel

__all__ = ["PROMPTS", "CHAPTER_RANGE", "LONG_RANGE", "logit_ranges"]

CHAPTER_RANGE = 127 / 16            # the largest int8 score in 1/16 logit
LONG_RANGE = 32767 / 64             # the largest 16-bit score in 1/64 logit

# Fixed text: prose, a list, code and a chat turn, so that the heads see more than one kind of input.
PROMPTS = (
    "The capital of France is Paris. It lies on the Seine and has been the country's capital for centuries.",
    "Shopping list: eggs, milk, flour, two lemons, butter and a bag of coffee beans.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n",
)


class _Recorder(FloatModel):
    """The float reference, noting every head's logits as it attends."""

    def __init__(self, model):
        super().__init__(model)
        self.block, self.seen = None, {}

    def attention_block(self, b, h, pos, cache, attend):
        self.block = b                                          # the block whose logits come next
        return super().attention_block(b, h, pos, cache, attend)

    def logits(self, q, keys):
        heads = super().logits(q, keys)
        self.seen.setdefault(self.block, []).extend(heads)
        return heads


def logit_ranges(model, prompts=PROMPTS):
    """One row per block: the largest |logit|, the largest spread (max - min) of one query's logits, and the
    fraction of logits beyond the chapter's int8 range, over every query of every prompt."""
    rec = _Recorder(model)
    for text in prompts:
        rec.prefill(model.encode(text))
    rows = []
    for block in range(model.config.blocks):
        per_query = rec.seen[block]
        flat = np.concatenate(per_query)
        rows.append({"block": block, "logits": int(flat.size), "max_abs": round(float(np.abs(flat).max()), 2),
                     "max_spread": round(float(max(np.ptp(x) for x in per_query)), 2),
                     "beyond_chapter": round(float(np.mean(np.abs(flat) > CHAPTER_RANGE)), 4),
                     "beyond_long": int(np.sum(np.abs(flat) > LONG_RANGE))})
    return rows
