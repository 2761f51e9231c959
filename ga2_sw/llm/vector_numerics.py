"""GA-2's integer numerics on numpy arrays, for a model's worth of heads at once: the same functions as
``ga2_sw.numerics`` (which stays the reference; tests/test_llm_ga2.py proves these equal to it), written as
array expressions. Every value is an exact integer in int64: the products of int8 operands are summed in
float64 matrix products, exact while a sum stays below 2**53 (a dot product of int8 vectors needs 2**53 / 127**2
= 5.6e11 terms to reach it), and the bounds noted below keep every intermediate inside int64."""

import numpy as np

from ..numerics import (DIGIT_BITS, EXP64_TABLE, EXP_DISTANCES, ONLINE_START, SCORE_MAX, SCORE_MIN, WEIGHT_MAX)

__all__ = ["int_matmul", "quantize", "requant", "scale_score", "online_partials", "causal_partials", "normalise",
           "online_attention"]

_EXP64 = np.array(EXP64_TABLE + (0,), dtype=np.int64)      # one more entry: every distance from 1,024 on is 0


def int_matmul(a, b):
    """The exact integer product of two int8 arrays (float64 BLAS, exact below 2**53; int64 result)."""
    out = np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)
    return np.rint(out).astype(np.int64)


def quantize(x, scale, limit=127):
    """``numerics.quantize`` element by element: round(x / scale) half away from zero, saturated to -127..127
    (``scale`` broadcasts, for example one per row); ``limit`` as ``numerics.quantize``'s (wide keys)."""
    y = np.asarray(x, dtype=np.float64) / scale
    q = np.abs(y)
    q += 0.5
    np.floor(q, out=q)
    np.minimum(q, limit, out=q)
    np.copysign(q, y, out=q)                # in place: a weight matrix's copies are a large part of its cost
    return q.astype(np.int64)


def _round_shift(a, m, s):
    a, m, s = np.asarray(a, dtype=np.int64), np.asarray(m, dtype=np.int64), np.asarray(s, dtype=np.int64)
    half = np.where(s > 0, np.left_shift(1, np.maximum(s - 1, 0)), 0)
    return (a * m + half) >> s                               # int64 >> is arithmetic (floor), as Python's


def requant(a, m, s):
    """``numerics.requant``: sat8((a*m + 2**(s-1)) >> s) for int32 ``a`` and m < 2**15 (|a*m| < 2**47)."""
    return np.clip(_round_shift(a, m, s), -128, 127)


def scale_score(a, m, s):
    """``numerics.scale_score``: a dot product to a 16-bit score in 1/64 logits."""
    return np.clip(_round_shift(a, m, s), SCORE_MIN, SCORE_MAX)


def _q16_scale(value, alpha):
    return (value * alpha + (1 << 15)) >> 16


def online_partials(q8, K8, V8, score_m, score_s, chunk):
    """Several heads' chunked online softmax (docs/LONG_CONTEXT.md), exactly as ``numerics.online_softmax_step``,
    ``weight_digits`` and ``rescale_add`` compute it one head at a time: ``q8`` (H, d) int8 queries, ``K8`` and
    ``V8`` (H, L, d) int8 keys and values (grouped-query heads pass the shared head's rows once per query head),
    ``score_m``/``score_s`` (H,) each head's score scaling. Wide keys (15 bits, ``numerics.WIDE_KEY_MAX``) are
    multiplied whole: the chip's two digit products, added by RSA, are the same integers. Returns the running
    int32 outputs (H, d) and the running sums (H,) after the last chunk: what ``normalise`` divides."""
    H, L = K8.shape[0], K8.shape[1]
    if L > (1 << 12):
        raise ValueError("online_partials covers contexts to 4,096 (numerics.ONLINE_MAX_CTX)")
    mx = np.full(H, ONLINE_START[0], dtype=np.int64)
    total = np.full(H, ONLINE_START[1], dtype=np.int64)
    partial = np.zeros(q8.shape, dtype=np.int64)
    dots = np.einsum("hld,hd->hl", K8.astype(np.float64), q8.astype(np.float64))      # MM: exact int32 sums
    scores = scale_score(np.rint(dots).astype(np.int64), np.asarray(score_m)[:, None], np.asarray(score_s)[:, None])
    for c0 in range(0, L, chunk):
        x = scores[:, c0:c0 + chunk]
        new_mx = np.maximum(mx, x.max(axis=1))
        w = (_EXP64[np.minimum(new_mx[:, None] - x, EXP_DISTANCES)] * WEIGHT_MAX + (1 << 15)) >> 16
        alpha = _EXP64[np.minimum(new_mx - mx, EXP_DISTANCES)]
        total = _q16_scale(total, alpha) + w.sum(axis=1)
        values = V8[:, c0:c0 + chunk].astype(np.float64)
        high = np.rint(np.einsum("hl,hld->hd", (w >> DIGIT_BITS).astype(np.float64), values)).astype(np.int64)
        low = np.rint(np.einsum("hl,hld->hd", (w & ((1 << DIGIT_BITS) - 1)).astype(np.float64),
                                values)).astype(np.int64)
        partial = _q16_scale(partial, alpha[:, None]) + (high << DIGIT_BITS) + low
        mx = new_mx
    return partial, total


def causal_partials(q8, K8, V8, score_m, score_s, chunk):
    """``online_partials`` of every position of a text at once (teacher forcing): the query of position ``p``
    (``q8[p]``, of (n, H, d)) over the keys and values of positions 0 .. p (``K8``, ``V8``: (n, KV, d), key/value
    head ``k`` shared by query heads ``k G .. k G + G - 1``, G = H / KV), with its own score scalings
    (``score_m[p]``, ``score_s[p]``, of (n, H)). The chunks are the text's tokens ``c0 .. c0 + chunk - 1`` for
    every query, a query's last one cut at its own position, so row ``p`` of the results is exactly
    ``online_partials(q8[p], K8[:p + 1] per query head, V8[:p + 1] per query head, ...)``: (partials (n, H, d),
    sums (n, H))."""
    n, H, d = q8.shape
    KV = K8.shape[1]
    G = H // KV
    if n > (1 << 12):
        raise ValueError("causal_partials covers texts to 4,096 tokens (numerics.ONLINE_MAX_CTX)")
    mx = np.full((n, H), ONLINE_START[0], dtype=np.int64)
    total = np.full((n, H), ONLINE_START[1], dtype=np.int64)
    partial = np.zeros((n, H, d), dtype=np.int64)
    m, s = np.asarray(score_m, dtype=np.int64), np.asarray(score_s, dtype=np.int64)
    queries = np.asarray(q8, dtype=np.float64).reshape(n, KV, G, d).transpose(1, 0, 2, 3)     # (KV, n, G, d)

    def grouped(a, rows):       # (rows, H, x) -> (KV, rows G, x): each key/value head's query heads together
        return a.reshape(rows, KV, G, -1).transpose(1, 0, 2, 3).reshape(KV, rows * G, -1)

    def ungrouped(a, rows):     # the inverse: (KV, rows G, x) -> (rows, H, x)
        return a.reshape(KV, rows, G, -1).transpose(1, 0, 2, 3).reshape(rows, H, -1)

    for c0 in range(0, n, chunk):
        c1, rows = min(n, c0 + chunk), n - c0              # the chunk's tokens; the queries at c0 and after
        keys = np.asarray(K8[c0:c1], dtype=np.float64).transpose(1, 2, 0)                       # (KV, d, C)
        dots = ungrouped(queries[:, c0:].reshape(KV, rows * G, d) @ keys, rows)        # MM: exact int32 sums
        x = scale_score(np.rint(dots).astype(np.int64), m[c0:, :, None], s[c0:, :, None])
        seen = (np.arange(c0, c1)[None, :] <= np.arange(c0, n)[:, None])[:, None, :]    # key at or before query
        x = np.where(seen, x, SCORE_MIN)                   # a key after the query moves no maximum...
        new_mx = np.maximum(mx[c0:], x.max(axis=2))
        w = (_EXP64[np.minimum(new_mx[:, :, None] - x, EXP_DISTANCES)] * WEIGHT_MAX + (1 << 15)) >> 16
        w = np.where(seen, w, 0)                           # ... and weighs nothing
        alpha = _EXP64[np.minimum(new_mx - mx[c0:], EXP_DISTANCES)]
        total[c0:] = _q16_scale(total[c0:], alpha) + w.sum(axis=2)
        values = np.asarray(V8[c0:c1], dtype=np.float64).transpose(1, 0, 2)                    # (KV, C, d)
        high, low = (ungrouped(np.rint(grouped(digit.astype(np.float64), rows) @ values).astype(np.int64), rows)
                     for digit in (w >> DIGIT_BITS, w & ((1 << DIGIT_BITS) - 1)))
        partial[c0:] = _q16_scale(partial[c0:], alpha[:, :, None]) + (high << DIGIT_BITS) + low
        mx[c0:] = new_mx
    return partial, total


def normalise(partial, total, m, s):
    """``numerics.normalise`` for each head: (H, d) running outputs, (H,) sums, (H,) multipliers and shifts."""
    s = np.asarray(s, dtype=np.int64)
    if np.any(s > 36):
        # the running sum stays below 4,095 * 4,097 < 2**24, so total << s < 2**61 for s <= 36 (the chip's
        # normalisation of a weighted mean of int8 values never needs more: m / 2**s ~ value scale / output scale)
        raise ValueError("normalise covers shifts to 36 (int64 holds the sum shifted by them)")
    den = np.asarray(total, dtype=np.int64)[:, None] << s[:, None]
    return np.clip((2 * partial * np.asarray(m, dtype=np.int64)[:, None] + den) // (2 * den), -128, 127)


def online_attention(q8, K8, V8, score_m, score_s, out_m, out_s, chunk):
    """``online_partials`` then ``normalise``: the int8 outputs (H, d)."""
    return normalise(*online_partials(q8, K8, V8, score_m, score_s, chunk), out_m, out_s)
