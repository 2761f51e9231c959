"""The integer numerics against independent formulations: exact rationals for requant, math.exp for the table
and float softmax for the fixed-point softmax."""

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, settings, strategies as st

from ga2_sw.numerics import (EXP_TABLE, Q16_ONE, mantissa_shift, quantize, requant, scale_for, s8, s32,
                             softmax_q16)


def requant_exact(a, m, s):
    """round(a * m / 2**s), halves towards +infinity, clamped to int8: in exact rational arithmetic."""
    v = math.floor(Fraction(a * m, 2 ** s) + Fraction(1, 2))
    return max(-128, min(127, v))


@settings(max_examples=1000, deadline=None)
@given(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 15), (1 << 15) - 1), st.integers(0, 47))
@example(0, 0, 0)
@example(-1, 1, 0)
@example(127, 1, 0)
@example(128, 1, 0)
@example(-129, 1, 0)
@example(-(1 << 31), -(1 << 15), 47)
@example((1 << 31) - 1, (1 << 15) - 1, 47)
@example(3, 1, 1)           # 1.5 -> 2
@example(-3, 1, 1)          # -1.5 -> -1 (ties towards +inf)
@example(-1, 1, 1)          # -0.5 -> 0
def test_requant_matches_exact_rounding(a, m, s):
    assert requant(a, m, s) == requant_exact(a, m, s)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(1 << 20), 1 << 20), st.integers(1, (1 << 15) - 1), st.integers(1, 47))
def test_requant_is_monotone_in_a(a, m, s):
    assert requant(a, m, s) <= requant(a + 1, m, s)


@settings(max_examples=1000, deadline=None)
@given(st.floats(-33.0, 14.99))
@example(-33.0)
@example(14.99)
@example(0.0)
def test_mantissa_shift_is_accurate(log2_r):
    r = 2.0 ** log2_r
    m, s = mantissa_shift(r)
    assert 0 < m < 1 << 15 and 0 <= s <= 47
    assert abs(m / 2 ** s - r) / r < 2 ** -14


def test_mantissa_shift_uses_the_largest_mantissa():
    for r in (1.0, 0.1, 127 / 65536, 3.7e-5, 1000.5):
        m, s = mantissa_shift(r)
        assert m >= 1 << 14 or s == 47
        assert s == 47 or round(r * 2 ** (s + 1)) >= 1 << 15


@pytest.mark.parametrize("bad, text", [
    (0, "positive finite"), (-1.0, "positive finite"), (float("nan"), "positive finite"),
    (float("inf"), "positive finite"), ("1", "positive finite"), (None, "positive finite"),
    (40000.0, "too large"), (1e-20, "too small"),
])
def test_mantissa_shift_errors(bad, text):
    with pytest.raises(ValueError, match=text):
        mantissa_shift(bad)


def test_exp_table():
    assert len(EXP_TABLE) == 256
    assert EXP_TABLE[0] == Q16_ONE == 65536
    assert all(a >= b for a, b in zip(EXP_TABLE, EXP_TABLE[1:]))
    # strictly decreasing while consecutive exact values differ by more than 1 (d < 16 ln(65536 / 16.5) = 132)
    assert all(a > b for a, b in zip(EXP_TABLE[:130], EXP_TABLE[1:131]))
    for d, e in enumerate(EXP_TABLE):
        assert isinstance(e, int) and abs(e - 65536 * math.exp(-d / 16)) <= 0.5
    assert EXP_TABLE[-1] == 0


def float_softmax_q16(scores):
    mx = max(scores)
    e = [math.exp((x - mx) / 16) for x in scores]
    return [65536 * v / sum(e) for v in e]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.integers(-128, 127), min_size=1, max_size=64))
def test_softmax_against_float(scores):
    p, f = softmax_q16(scores), float_softmax_q16(scores)
    n = len(scores)
    assert all(0 <= v <= 65536 for v in p)
    assert abs(sum(p) - 65536) <= n
    for pi, fi in zip(p, f):
        # 0.5 for the final rounding, 0.5 for the element's own table entry, and the table errors of the
        # other n-1 entries (<= 0.5 each) in the sum, which shift every element by fi/65536 of their total
        assert abs(pi - fi) <= 1 + 0.5 * (n - 1) * fi / 65536 + 1e-9


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(-128, 127), min_size=1, max_size=2))
def test_short_softmax_within_two_units(scores):
    assert all(abs(pi - fi) <= 2 for pi, fi in zip(softmax_q16(scores), float_softmax_q16(scores)))


def test_softmax_edge_cases():
    assert softmax_q16([5]) == [65536]
    assert softmax_q16([-128, -128]) == [32768, 32768]
    assert softmax_q16([127, -128]) == [65536, 0]         # d = 255: EXP_TABLE[255] = 0
    p = softmax_q16([0] * 64)
    assert p == [1024] * 64
    with pytest.raises(ValueError):
        softmax_q16([])


def test_softmax_error_grows_with_many_small_tails():
    """The table's own rounding errors add up in the sum: 63 equal tails at d = 125 shift the head by ~29
    units of 1/65536. Inherent in the ISA's 16-bit table, and 0.06 of an int8 weight LSB after requant."""
    scores = [0] + [-125] * 63
    err = abs(softmax_q16(scores)[0] - float_softmax_q16(scores)[0])
    assert 20 < err < 1 + 0.5 * 63


def test_quantize_and_scale():
    assert quantize(1.0, 1 / 127) == 127
    assert quantize(-2.0, 1 / 127) == -127                # saturates to -127, not -128
    assert quantize(0.5, 1.0) == 1 and quantize(-0.5, 1.0) == -1 and quantize(0.49, 1.0) == 0
    assert scale_for([0.5, -2.54, 1.0]) == pytest.approx(2.54 / 127)
    assert scale_for([]) == 1.0 and scale_for([0.0]) == 1.0


def test_word_views():
    assert s8(0xFF) == -1 and s8(0x17F) == 127 and s8(0x80) == -128 and s8(0xFFFFFF81) == -127
    assert s32(0xFFFFFFFF) == -1 and s32(0x7FFFFFFF) == (1 << 31) - 1 and s32(1 << 32) == 0
