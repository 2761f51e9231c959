"""Attention over long contexts in GA-2's integer numerics: the chunked online softmax of docs/LONG_CONTEXT.md
(``ga2_sw.numerics.online_softmax_step``, ``rescale_add``, ``normalise``) against float attention.

This is the arithmetic the chip's long-context programs are to compute, chunk by chunk: scores from int8 q and
K (an int32 matrix product), scaled to 1/64 logits in 16 bits, the online softmax's 12-bit weights, int32 partial
outputs from their two int8 digits times int8 values, rescaled as the maximum grows, one division at the end. The products
are exact integers (numpy int64); everything else is ``ga2_sw.numerics``. ``ga2 accuracy --online`` reports it.
With ``key_digits = 2`` the keys are wide (15 bits as two int8 digits, ``numerics.wide_key_digits``): one score product
per digit plane, added as RSA adds them (``rescale_add`` with alpha 0)."""

import math

import numpy as np

from ..numerics import (KEY_DIGITS, KEY_LIMIT, ONLINE_START, SCORE_UNIT, mantissa_shift, normalise,
                        online_softmax_step, quantize, rescale_add, scale_for, scale_score, weight_digits,
                        wide_key_digits)

__all__ = ["WORKLOADS", "head_workload", "float_attention", "integer_attention", "online_accuracy", "error_budget",
           "BUDGET_VARIANTS", "DEFAULT_CHUNK"]

DEFAULT_CHUNK = 64          # tokens per chunk: the softmax unit's default sm_max_len

# The float workloads: "random" draws q, K, V from N(0, 1), so the logits q.k / sqrt(d) are about N(0, 1);
# "peaked" scales q by 4, so the logits spread over tens of units (N(0, 16)) and a few tokens dominate.
WORKLOADS = {"random": 1.0, "peaked": 4.0}


def head_workload(L, d, seed, workload="random"):
    """Float q (d,), K (L, d) and V (L, d) of one attention head."""
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, 1.0, d) * WORKLOADS[workload]
    return q, rng.normal(0.0, 1.0, (L, d)), rng.normal(0.0, 1.0, (L, d))


def _heads(L, d, seeds, workload):
    """The heads one row of ``online_accuracy`` or ``error_budget`` averages over: the same in both."""
    return [head_workload(L, d, 1000 * L + seed, workload) for seed in seeds]


def float_attention(q, K, V):
    """softmax(K q / sqrt(d)) V in float64."""
    logits = K @ q / math.sqrt(len(q))
    p = np.exp(logits - logits.max())
    return (p / p.sum()) @ V


def _quantised(x, scale, limit=127):
    return np.array([quantize(float(v), scale, limit) for v in np.ravel(x)], dtype=np.int64).reshape(np.shape(x))


def quantised_keys(K, key_digits=1):
    """The keys as the chip holds them, with their scale: int8, or wide (``scale_for`` at ``WIDE_KEY_MAX``)."""
    if key_digits not in KEY_DIGITS:
        raise ValueError(f"keys have 1 or 2 int8 digits, not {key_digits}")
    limit = KEY_LIMIT[key_digits]
    sk = scale_for(list(np.ravel(K)), limit)
    return _quantised(K, sk, limit), sk


def integer_attention(q, K, V, out_scale, chunk=DEFAULT_CHUNK, key_digits=1):
    """The int8 output of one head over ``len(K)`` tokens, ``chunk`` at a time, and what it needed: returns
    (out8, details). Scales are per tensor (``scale_for``: max |v| / 127, wide keys max |k| / WIDE_KEY_MAX);
    ``out_scale`` is the output's."""
    d = len(q)
    sq, sv = scale_for(list(q)), scale_for(list(np.ravel(V)))
    q8, V8 = _quantised(q, sq), _quantised(V, sv)
    Kq, sk = quantised_keys(K, key_digits)
    if key_digits == 2:     # the digit planes the chip's two score MMs read
        planes = np.array([[wide_key_digits(int(k)) for k in row] for row in Kq], dtype=np.int64)
    m_sc, s_sc = mantissa_shift(sq * sk / math.sqrt(d) * SCORE_UNIT)      # q.k to 1/64 logits
    m_o, s_o = mantissa_shift(sv / out_scale)                      # the weighted mean of int8 values to int8 out
    state, partial = ONLINE_START, [0] * d
    for c0 in range(0, len(Kq), chunk):
        if key_digits == 1:
            dots = Kq[c0:c0 + chunk] @ q8                          # MM: int32 scores of the chunk
        else:                                                      # two MMs, one per digit plane, and RSA
            hi_dots, lo_dots = ([int(v) for v in planes[c0:c0 + chunk, :, p] @ q8] for p in (0, 1))
            dots = rescale_add([0] * len(hi_dots), 0, hi_dots, lo_dots)
        scores = [scale_score(int(a), m_sc, s_sc) for a in dots]
        weights, alpha, state = online_softmax_step(scores, state)
        high, low = weight_digits(weights)
        values = V8[c0:c0 + chunk]                                 # two MMs: int8 digits x int8 values
        partial = rescale_add(partial, alpha, [int(v) for v in np.array(high, dtype=np.int64) @ values],
                              [int(v) for v in np.array(low, dtype=np.int64) @ values])
    out8 = normalise(partial, state[1], m_o, s_o)
    return out8, {"score_m_s": (m_sc, s_sc), "out_m_s": (m_o, s_o), "max": state[0], "sum": state[1]}


def online_accuracy(lengths, d=64, seeds=(0, 1), workloads=tuple(WORKLOADS), chunk=DEFAULT_CHUNK, progress=None,
                    key_digits=1):
    """One row per (workload, length): the int8 outputs' error against float attention over ``seeds`` heads,
    in output LSBs (|out8 - out_float / scale_o|, scale_o = max |out_float| / 127 per head) and relative to
    the RMS of the float output (sqrt(mean (out8 * scale_o - out_float)^2) / sqrt(mean out_float^2)); keys of
    ``key_digits`` int8 digits."""
    tick = progress or (lambda n: None)
    rows = []
    for workload in workloads:
        for L in lengths:
            lsb, sq_err, sq_ref = [], 0.0, 0.0
            for q, K, V in _heads(L, d, seeds, workload):
                ref = float_attention(q, K, V)
                so = scale_for(list(ref))
                out8, _ = integer_attention(q, K, V, so, chunk, key_digits)
                got = np.array(out8, dtype=float)
                lsb += list(np.abs(got - ref / so))
                sq_err += float(np.sum((got * so - ref) ** 2))
                sq_ref += float(np.sum(ref ** 2))
                tick(1)
            rows.append({"workload": workload, "length": L, "d": d, "chunk": chunk, "key_digits": key_digits,
                         "heads": len(seeds),
                         "values": len(lsb), "max_lsb": round(float(max(lsb)), 3),
                         "mean_lsb": round(float(sum(lsb)) / len(lsb), 3),
                         "rms_rel": round(math.sqrt(sq_err / sq_ref), 4)})
    return rows


# The error budget: float attention with one approximation at a time, to see which one the error comes from.
# (the key digits of q, K, V quantised per tensor: None for exact, 1 for int8 q, K, V, 2 for int8 q, V and wide
# keys; score resolution in units per logit, None for exact; weight bits, None for exact.) The chip's choices are
# the last two rows: int8 or wide keys, 1/64-logit scores, 12-bit weights.
BUDGET_VARIANTS = (
    ("int8 q, K, V only", 1, None, None),
    ("int8 q, V, wide K only", 2, None, None),
    ("1/16-logit scores, 7-bit weights (exact q, K, V)", None, 16, 7),
    ("1/64-logit scores, 12-bit weights (exact q, K, V)", None, 64, 12),
    ("int8 q, K, V, 1/16-logit scores, 7-bit weights", 1, 16, 7),
    ("int8 q, K, V, 1/64-logit scores, 12-bit weights", 1, 64, 12),
    ("int8 q, V, wide K, 1/64-logit scores, 12-bit weights", 2, 64, 12),
)


def _approximate(q, K, V, key_digits, units, weight_bits):
    if key_digits:
        sq, sv = scale_for(list(q)), scale_for(list(np.ravel(V)))
        Kq, sk = quantised_keys(K, key_digits)
        q, K, V = _quantised(q, sq) * sq, Kq * sk, _quantised(V, sv) * sv
    logits = K @ q / math.sqrt(len(q))
    if units:
        logits = np.floor(logits * units + 0.5) / units
    e = np.exp(logits - logits.max())
    if weight_bits:
        e = np.floor(e * ((1 << weight_bits) - 1) + 0.5)
    return (e @ V) / e.sum()


def error_budget(lengths, d=64, seeds=(0, 1), workloads=tuple(WORKLOADS)):
    """One row per (workload, length, variant of BUDGET_VARIANTS): max and mean error in output LSBs of float
    attention computed with that variant's approximations (in float64, not the chip's integers)."""
    rows = []
    for workload in workloads:
        for L in lengths:
            heads = _heads(L, d, seeds, workload)
            refs = [float_attention(*h) for h in heads]
            for label, keys, units, bits in BUDGET_VARIANTS:
                lsb = np.concatenate([np.abs(_approximate(*h, keys, units, bits) - ref) / scale_for(list(ref))
                                      for h, ref in zip(heads, refs)])
                rows.append({"workload": workload, "length": L, "variant": label, "max_lsb": round(float(lsb.max()), 3),
                             "mean_lsb": round(float(lsb.mean()), 3)})
    return rows
