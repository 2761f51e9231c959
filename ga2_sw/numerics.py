"""Integer numerics of GA-2: quantisation, requantisation and the fixed-point softmax (docs/ISA.md).

Everything here is plain Python on ints, the reference the hardware is held to. EXP_TABLE is the table the
RTL's exp ROM is built from."""

import math

__all__ = ["quantize", "scale_for", "mantissa_shift", "requant", "EXP_TABLE", "softmax_q16",
           "s8", "s32", "u32", "sat8", "Q16_ONE", "MAX_SHIFT", "M_BITS", "SCORE_UNIT", "SCORE_MIN", "SCORE_MAX",
           "EXP64_TABLE", "EXP_DISTANCES", "WEIGHT_BITS", "WEIGHT_MAX", "DIGIT_BITS", "ONLINE_MAX_CTX", "ONLINE_START",
           "exp64", "weight_of_exp", "WEIGHT64_TABLE", "scale_score", "online_softmax_step", "weight_digits", "rescale_add", "normalise", "NRM_MAX_SHIFT",
           "ALPHA_BITS", "smc_words", "wide_score_words", "rsa_word", "nrm_word", "KEY_DIGITS", "KEY_LIMIT", "WIDE_KEY_MAX",
           "wide_key_digits"]

Q16_ONE = 1 << 16
MAX_SHIFT = 47          # the requantiser's product is 48 bits wide
M_BITS = 16             # the requantiser's multiplier is a signed 16-bit integer


def s8(word):
    """The int8 operand carried in the low 8 bits of a word."""
    v = word & 0xFF
    return v - 256 if v & 0x80 else v


def s32(word):
    v = word & 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def u32(value):
    return value & 0xFFFFFFFF


def sat8(v):
    return max(-128, min(127, v))


def _round_half_away(x):
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def quantize(x, scale, limit=127):
    """Float to int8 with a symmetric scale: round(x / scale), saturated to -127..127 (to -limit..limit: wide
    keys take ``limit=WIDE_KEY_MAX``)."""
    return max(-limit, min(limit, _round_half_away(x / scale)))


def scale_for(values, limit=127):
    """Symmetric int8 scale of a set of floats: max |v| / 127 (1.0 for an all-zero set); max |v| / limit for
    integers up to ``limit`` (wide keys: ``WIDE_KEY_MAX``)."""
    peak = max((abs(v) for v in values), default=0.0)
    return peak / limit if peak > 0 else 1.0


def mantissa_shift(r):
    """A positive real multiplier r as (m, s) with r ~ m / 2**s, m < 2**15, s <= 47, m as large as possible."""
    if not (isinstance(r, (int, float)) and math.isfinite(r) and r > 0):
        raise ValueError(f"Requantisation multiplier must be a positive finite number, not {r!r}")
    limit = 1 << (M_BITS - 1)
    best = None
    for s in range(MAX_SHIFT + 1):
        m = _round_half_away(r * (1 << s))
        if m >= limit:
            break
        best = (m, s)
    if best is None:
        raise ValueError(f"Requantisation multiplier {r!r} is too large: it needs m >= {limit} even at s = 0")
    if best[0] == 0:
        raise ValueError(f"Requantisation multiplier {r!r} is too small: it rounds to 0 even at s = {MAX_SHIFT}")
    return best


def _round_shift(a, m, s):
    """(a*m + 2**(s-1)) >> s, an arithmetic shift with ties towards +inf (no rounding term at s = 0)."""
    v = a * m
    return (v + (1 << (s - 1))) >> s if s > 0 else v


def requant(a, m, s):
    """int32 a to int8: (a*m + 2**(s-1)) >> s (arithmetic, ties towards +inf), saturated to -128..127."""
    return sat8(_round_shift(a, m, s))


EXP_TABLE = tuple(_round_half_away(Q16_ONE * math.exp(-d / 16)) for d in range(256))


def softmax_q16(scores):
    """Fixed-point softmax of int8 scores in units of 1/16 into Q16 probabilities (0..65536)."""
    if not scores:
        raise ValueError("Softmax needs at least one score")
    mx = max(scores)
    e = [EXP_TABLE[mx - x] for x in scores]
    total = sum(e)
    return [(ei * Q16_ONE + total // 2) // total for ei in e]


# -- the online softmax of long contexts (docs/LONG_CONTEXT.md) -------------------------------------------------
#
# Attention over a context too long for the scratchpad runs chunk by chunk with a running maximum and a running
# sum, and normalises once at the end. Scores are signed 16-bit numbers of 1/64 logits (+-512 logits: a peaked
# head never saturates; the chapter's int8 of 1/16 saturates at +-7.9); a chunk's weights are 12-bit fractions
# of the running maximum's exponential (two int8 digits for the P V products), so a weight never shrinks with
# the context's length, only with its distance from the maximum; the partial outputs are int32 sums of weights
# times values, rescaled when the maximum grows. docs/LONG_CONTEXT.md measures why these widths: 1/16-logit
# scores with 7-bit weights erred by up to 14.8 output LSBs at 4,096 tokens with exact q, K and V.

SCORE_UNIT = 64                                        # score units per logit
SCORE_MIN, SCORE_MAX = -(1 << 15), (1 << 15) - 1     # a score: a signed 16-bit number of 1/64 logits
EXP_DISTANCES = 16 * SCORE_UNIT                        # distances with a nonzero exponential: 0..1023
# round(65536 * exp(-d/64)): the online softmax's exp ROM (1,024 x 17 bits), the chapter's EXP_TABLE at four
# times its resolution (every fourth entry is the chapter's). From d = 755 on every entry rounds to 0.
EXP64_TABLE = tuple(_round_half_away(Q16_ONE * math.exp(-d / SCORE_UNIT)) for d in range(EXP_DISTANCES))
WEIGHT_BITS = 12
WEIGHT_MAX = (1 << WEIGHT_BITS) - 1                    # a weight: 0..4095
DIGIT_BITS = 7                                         # ... as two int8 operands: w = hi * 128 + lo
ONLINE_MAX_CTX = 4096                                  # |partial| <= 127 * sum <= 127 * (4095 * L + chunks) < 2**31
ONLINE_START = (SCORE_MIN, 0)                          # (running maximum, running sum) before the first chunk


def exp64(d):
    """round(65536 * exp(-d/64)) for a distance ``d >= 0`` from the maximum, in 1/64 logits (0 from 755 on)."""
    if d < 0:
        raise ValueError(f"exp64 takes a distance from the maximum (>= 0), not {d}")
    return EXP64_TABLE[d] if d < EXP_DISTANCES else 0


def scale_score(a, m, s):
    """An int32 dot product q.k to a score in 1/64 logits: (a*m + 2**(s-1)) >> s as requant rounds, saturated to
    the 16-bit score range (not to int8)."""
    return max(SCORE_MIN, min(SCORE_MAX, _round_shift(a, m, s)))


def _q16_scale(value, alpha):
    """value * alpha / 65536, rounded half up (alpha a Q16 fraction, 0..65536)."""
    return (value * alpha + (1 << 15)) >> 16


def weight_of_exp(e):
    """A score's weight from its ``exp64``: ``(e * 4095 + 2**15) >> 16``, 0..4095."""
    return (e * WEIGHT_MAX + (1 << 15)) >> 16


# The weight of every distance in the exp table (the online unit reads it beside EXP64_TABLE).
WEIGHT64_TABLE = tuple(weight_of_exp(e) for e in EXP64_TABLE)


def online_softmax_step(scores, state):
    """One chunk of the online softmax: ``scores`` (1/64 logits) and ``state`` = (running maximum, running
    sum) -> (weights, alpha, new state).

    ``mx = max(state max, scores)``; weight ``w_i = (exp64(mx - x_i) * 4095 + 2**15) >> 16`` (0..4095, 4095 at
    the maximum); ``alpha = exp64(mx - state max)`` rescales what came before; the new sum is
    ``(sum * alpha + 2**15) >> 16`` plus the chunk's weights: the weights the P V products use, so the final
    division makes a convex combination of the values whatever the rounding."""
    if not scores:
        raise ValueError("An online softmax step needs at least one score")
    old_max, total = state
    mx = max(old_max, max(scores))
    weights = [weight_of_exp(exp64(mx - x)) for x in scores]
    alpha = exp64(mx - old_max)
    return weights, alpha, (mx, _q16_scale(total, alpha) + sum(weights))


def weight_digits(weights):
    """The int8 operands of a chunk's P V products: (high digits ``w >> 7``, 0..31; low digits ``w & 127``)."""
    return [w >> DIGIT_BITS for w in weights], [w & ((1 << DIGIT_BITS) - 1) for w in weights]


# Wide keys (docs/LONG_CONTEXT.md, "Wide keys"): a key as two int8 digits, ``k = 128 * hi + lo``, hi in -127..127 and
# lo in -64..63, so 15-bit keys, -16256..16256. The chip multiplies each digit plane by the queries (two score
# MMs) and RSA, with alpha 0, adds them as ``128 * hi + lo``: the scores are exact int32 products q.k
# (|q.k| <= 127 * 16256 * 64 < 2**27, well inside the SMC multiplier's 32 bits).
WIDE_KEY_MAX = 127 << DIGIT_BITS
# The largest key of each choice of int8 digits per key: int8 keys, or wide keys (quantised with ``quantize`` and
# ``scale_for`` at that limit).
KEY_LIMIT = {1: 127, 2: WIDE_KEY_MAX}
KEY_DIGITS = tuple(KEY_LIMIT)


def wide_key_digits(k):
    """A wide key's two int8 digits ``(hi, lo)``, ``k = 128 * hi + lo``: hi in -127..127, lo in -64..63."""
    if not -WIDE_KEY_MAX <= k <= WIDE_KEY_MAX:
        raise ValueError(f"a wide key is in -{WIDE_KEY_MAX}..{WIDE_KEY_MAX}, not {k}")
    hi = (k + (1 << (DIGIT_BITS - 1))) >> DIGIT_BITS
    return hi, k - (hi << DIGIT_BITS)


def rescale_add(partial, alpha, high, low):
    """The running int32 outputs after a chunk: ``partial * alpha / 65536`` (rounded half up) plus the chunk's
    products ``128 * high + low`` (the P V products of its high and low weight digits)."""
    return [_q16_scale(p, alpha) + (h << DIGIT_BITS) + lo for p, h, lo in zip(partial, high, low)]


def normalise(partial, total, m, s):
    """The int8 outputs: ``sat8(round(partial * m / (total * 2**s)))``, rounded half up; ``total`` >= 1 (the
    chunk holding the maximum adds a weight of 4095)."""
    if total < 1:
        raise ValueError(f"normalise needs a positive running sum, not {total}")
    den = total << s
    return [sat8((2 * p * m + den) // (2 * den)) for p in partial]


# -- the long-context instructions on words (docs/ISA.md: SMC, RSA, NRM) -----------------------------------------

NRM_MAX_SHIFT = 31      # NRM's s: S * 2**s stays below 2**63 with S an int32
ALPHA_BITS = 17         # RSA reads alpha as the low 17 bits of its word (0 .. 131071; SMC writes 0 .. 65536)


def smc_words(scores, state_max, state_sum, m, s):
    """SMC on words: ``scores`` (int32 dot products, as words), the state's words ``sp[st]`` (the running
    maximum, int32) and ``sp[st+1]`` (the running sum, int32) -> (high digits, low digits, new maximum, new sum,
    alpha), every one a word to write (the sum modulo 2**32)."""
    x = [scale_score(s32(a), m, s) for a in scores]
    weights, alpha, (mx, total) = online_softmax_step(x, (s32(state_max), s32(state_sum)))
    high, low = weight_digits(weights)
    return high, low, u32(mx), u32(total), alpha


def wide_score_words(high, low):
    """SMC's ``ws`` scores: ``128 * high + low`` modulo 2**32 of each pair of int32 words, the two planes' dot
    products of wide keys (``DIGIT_BITS``: what RSA with alpha 0 adds)."""
    return [u32((s32(h) << DIGIT_BITS) + s32(l)) for h, l in zip(high, low)]


def rsa_word(partial, alpha_word, high, low):
    """RSA on one element's words: ``((partial * alpha + 2**15) >> 16) + 128 * high + low`` modulo 2**32, with
    ``alpha`` the low ALPHA_BITS bits of its word and the others int32."""
    alpha = alpha_word & ((1 << ALPHA_BITS) - 1)
    return u32(rescale_add([s32(partial)], alpha, [s32(high)], [s32(low)])[0])


def nrm_word(partial, state_sum, m, s):
    """NRM on one element's words: ``normalise`` of the int32 ``partial`` by the int32 running sum, as an int8
    word (sign-extended); 0 when the sum is not positive (no chunk ran)."""
    total = s32(state_sum)
    return u32(normalise([s32(partial)], total, m, s)[0]) if total >= 1 else 0
