"""Integer numerics of GA-2: quantisation, requantisation and the fixed-point softmax (docs/ISA.md).

Everything here is plain Python on ints, the reference the hardware is held to. EXP_TABLE is the table the
RTL's exp ROM is built from."""

import math

__all__ = ["quantize", "scale_for", "mantissa_shift", "requant", "EXP_TABLE", "softmax_q16",
           "s8", "s32", "u32", "sat8", "Q16_ONE", "MAX_SHIFT", "M_BITS"]

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


def quantize(x, scale):
    """Float to int8 with a symmetric scale: round(x / scale), saturated to -127..127."""
    return max(-127, min(127, _round_half_away(x / scale)))


def scale_for(values):
    """Symmetric int8 scale of a set of floats: max |v| / 127 (1.0 for an all-zero set)."""
    peak = max((abs(v) for v in values), default=0.0)
    return peak / 127 if peak > 0 else 1.0


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


def requant(a, m, s):
    """int32 a to int8: (a*m + 2**(s-1)) >> s (arithmetic, ties towards +inf), saturated to -128..127."""
    v = a * m
    if s > 0:
        v = (v + (1 << (s - 1))) >> s
    return sat8(v)


EXP_TABLE = tuple(_round_half_away(Q16_ONE * math.exp(-d / 16)) for d in range(256))


def softmax_q16(scores):
    """Fixed-point softmax of int8 scores in units of 1/16 into Q16 probabilities (0..65536)."""
    if not scores:
        raise ValueError("Softmax needs at least one score")
    mx = max(scores)
    e = [EXP_TABLE[mx - x] for x in scores]
    total = sum(e)
    return [(ei * Q16_ONE + total // 2) // total for ei in e]
