"""``ga2 llm eval``: the GA-2 path (``ga2_path.Ga2Model``) against the float reference on a fixed text, with
teacher forcing (both read the text's own tokens, each with its own cache), and greedy generation from fixed
prompts side by side."""

import numpy as np

from .float_model import FloatModel
from .ga2_path import BY_DIGITS, HEAD_CANDIDATES, PATH_KEY_DIGITS, SMOOTHING, Ga2Model, calibrate
from .texts import EVAL_TEXT, GENERATE_PROMPTS

__all__ = ["text_parts", "teacher_forced", "plot_eval", "greedy_pairs", "evaluate"]


def _log_softmax(logits):
    z = logits.astype(np.float64) - logits.max()
    return z - np.log(np.exp(z).sum())


def text_parts(model):
    """The parts ``teacher_forced`` counts its progress in: each block and the head, on both paths."""
    return 2 * (model.config.blocks + 1)


def teacher_forced(model, ga2, tokens, progress=None):
    """Both paths over ``tokens``: after each token but the last, the next token's top-1 agreement and each
    path's log-likelihood of the text's next token. Each path reads the whole text at once, block by block
    (``FloatModel.text_logits``: the GA-2 path's logits exactly those of its steps, the float model's up to the
    order its matrix products add in); ``progress(1)`` after each block of each path and each head
    (``text_parts``). Returns the summary dict, with ``per_token``: each position's negative log-likelihood on
    both paths and whether their top-1 tokens agree."""
    logits_f = FloatModel(model).text_logits(tokens[:-1], progress)
    logits_g = ga2.text_logits(tokens[:-1], progress)
    agree, nll_f, nll_g = [], [], []
    text_f = text_g = 0
    kl = 0.0
    for pos, (row_f, row_g) in enumerate(zip(logits_f, logits_g)):
        lf, lg = _log_softmax(row_f), _log_softmax(row_g)
        nxt = tokens[pos + 1]
        agree.append(bool(np.argmax(lf) == np.argmax(lg)))
        text_f += int(np.argmax(lf) == nxt)
        text_g += int(np.argmax(lg) == nxt)
        nll_f.append(float(-lf[nxt]))
        nll_g.append(float(-lg[nxt]))
        kl += float(np.sum(np.exp(lf) * (lf - lg)))
    n = len(tokens) - 1
    return {"tokens": n, "top1_agreement": round(sum(agree) / n, 4),
            "perplexity_float": round(float(np.exp(sum(nll_f) / n)), 3),
            "perplexity_ga2": round(float(np.exp(sum(nll_g) / n)), 3),
            "perplexity_ratio": round(float(np.exp((sum(nll_g) - sum(nll_f)) / n)), 4),
            "kl_float_to_ga2": round(kl / n, 5),
            "top1_text_float": round(text_f / n, 4), "top1_text_ga2": round(text_g / n, 4),
            "per_token": {"nll_float": [round(v, 4) for v in nll_f], "nll_ga2": [round(v, 4) for v in nll_g],
                          "agree": agree}}


def plot_eval(result, path):
    """Two panels: each position's negative log-likelihood of the text's next token, float32 against the GA-2
    path (on the diagonal where they agree); and the top-1 agreement over the text so far."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from ..analyses.common import finish_plot
    per = result["per_token"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    f, g, agree = np.array(per["nll_float"]), np.array(per["nll_ga2"]), np.array(per["agree"])
    top = float(max(f.max(), g.max())) * 1.05
    left.plot([0, top], [0, top], color="0.6", lw=1)
    left.scatter(f[agree], g[agree], s=8, label="top-1 tokens agree")
    left.scatter(f[~agree], g[~agree], s=12, color="tab:red", label="top-1 tokens differ")
    left.set(xlabel="float32: -log p(next token of the text)", ylabel="GA-2 path: -log p(next token)",
             title=f"per token, {result['tokens']} tokens (perplexity {result['perplexity_float']:.2f} / "
                   f"{result['perplexity_ga2']:.2f})")
    left.legend(loc="upper left")
    running = np.cumsum(agree) / np.arange(1, len(agree) + 1)
    right.plot(np.arange(1, len(agree) + 1), 100 * running)
    right.axhline(95, color="0.6", ls="--", lw=1, label="the goal, 95%")
    right.set(xlabel="tokens of the text scored", ylabel="top-1 agreement so far (%)",
              title=f"top-1 agreement with the float model: {100 * result['top1_agreement']:.2f}%",
              ylim=(min(80.0, float(100 * running.min()) - 2), 100.5))
    right.legend(loc="lower right")
    finish_plot(fig, path)


def greedy_pairs(model, ga2, prompts, max_tokens, progress=None):
    """Greedy continuations of each prompt by both paths, each path's prompts stepped together
    (``generate_batch``): one row per prompt with both texts, the tokens generated and how many leading tokens
    they share. ``progress(1)`` after each step of each path (``2 x max_tokens``)."""
    stop = set()                        # a fixed number of tokens: no stop at end-of-text
    floats = FloatModel(model).generate_batch(prompts, max_tokens, stop, progress)
    ga2s = ga2.generate_batch(prompts, max_tokens, stop, progress)
    rows = []
    for prompt, f, g in zip(prompts, floats, ga2s):
        same = next((i for i, (a, b) in enumerate(zip(f, g)) if a != b), min(len(f), len(g)))
        rows.append({"prompt": prompt, "float": model.decode(f), "ga2": model.decode(g), "tokens": len(f),
                     "common_prefix": same})
    return rows


def evaluate(model, text=EVAL_TEXT, max_text_tokens=None, weight_scales="per-row", key_scales="per-head",
             smoothing=SMOOTHING, prompts=GENERATE_PROMPTS, generate_tokens=64, progress=None, fine_output=True,
             digits=2, key_digits=PATH_KEY_DIGITS, linears="chip", weight_digits=1, linear_smoothing=BY_DIGITS,
             head_candidates=HEAD_CANDIDATES):
    """The evaluation's JSON: the teacher-forced summary over ``text`` (its first ``max_text_tokens`` tokens
    when given), the int8 values at their limit on the GA-2 path, and the greedy pairs (none when
    ``generate_tokens`` is 0)."""
    cal = calibrate(model)
    tokens = model.encode(text)[:max_text_tokens]
    ga2 = Ga2Model(model, cal, weight_scales, key_scales, smoothing=smoothing, fine_output=fine_output,
                   digits=digits, key_digits=key_digits, linears=linears, weight_digits=weight_digits,
                   linear_smoothing=linear_smoothing, head_candidates=head_candidates)
    result = teacher_forced(model, ga2, tokens, progress)
    result.update({"weight_scales": weight_scales, "key_scales": key_scales, "smoothing": ga2.smoothing,
                   "linear_smoothing": ga2.linear_smoothing if linears == "chip" else None,
                   "output_readings": 2 if fine_output else 1, "input_digits": digits, "key_digits": key_digits,
                   "head_candidates": ga2.head_candidates,
                   "calibration_prompts": len(cal.prompts), "at_int8_limit": dict(ga2.at_limit),
                   "linears": linears, "weight_digits": ga2.weight_digits,
                   "weights_on_chip_fraction": round(ga2.weights_on_chip_fraction, 6),
                   "chunk": ga2.chunk})
    # the same quantised weights for the generation: the counts above are the text's alone (already copied)
    result["generation"] = greedy_pairs(model, ga2, prompts, generate_tokens, progress) if generate_tokens else []
    return result
