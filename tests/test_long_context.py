"""The long-context numerics (docs/LONG_CONTEXT.md): ``ga2_sw.numerics``' online softmax against a plain-Python
rendering written from the document (its own exp table, its own loop over chunks, exact rationals for the
roundings), against exact float softmax and float attention, and the analysis behind ``ga2 accuracy --online``."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from ga2_sw import numerics as N
from ga2_sw.analyses.long_context import float_attention, head_workload, integer_attention, online_accuracy


# -- the document's arithmetic, written again --------------------------------------------------------------------

def doc_exp(d):
    """docs/LONG_CONTEXT.md: round(65536 e^(-d/64)) for 0 <= d < 1024 (half away from zero), 0 beyond."""
    return math.floor(65536 * math.exp(-d / 64) + 0.5) if d < 1024 else 0


def round_half_up(x):
    """floor(x + 1/2) of an exact rational."""
    return math.floor(Fraction(x) + Fraction(1, 2))


def doc_attention(scores, values, m, s):
    """The document's chunk loop on plain lists: ``scores`` a list of chunks of 1/64-logit scores, ``values``
    the matching chunks of int8 value rows; returns the int8 outputs."""
    mx, total, partial = -32768, 0, [0] * len(values[0][0])
    for chunk_scores, chunk_values in zip(scores, values):
        new_mx = max([mx] + chunk_scores)
        weights = [round_half_up(Fraction(doc_exp(new_mx - x) * 4095, 65536)) for x in chunk_scores]
        alpha = doc_exp(new_mx - mx)
        total = round_half_up(Fraction(total * alpha, 65536)) + sum(weights)
        for j in range(len(partial)):
            hi = sum((w // 128) * row[j] for w, row in zip(weights, chunk_values))
            lo = sum((w % 128) * row[j] for w, row in zip(weights, chunk_values))
            partial[j] = round_half_up(Fraction(partial[j] * alpha, 65536)) + 128 * hi + lo
        mx = new_mx
    return [max(-128, min(127, round_half_up(Fraction(p * m, total * 2 ** s)))) for p in partial]


def test_exp_table_is_the_documents():
    assert N.EXP64_TABLE == tuple(doc_exp(d) for d in range(1024))
    assert N.EXP64_TABLE[0] == 65536 and N.EXP64_TABLE[64] == 24109
    assert N.EXP64_TABLE[754] == 1 and not any(N.EXP64_TABLE[755:])      # e^(-755/64) < 1/131072
    assert N.exp64(1024) == N.exp64(10 ** 6) == 0
    assert N.EXP64_TABLE[::4] == N.EXP_TABLE          # four times the chapter's resolution, the same values
    with pytest.raises(ValueError):
        N.exp64(-1)


chunks = st.lists(st.lists(st.integers(-3000, 3000), min_size=1, max_size=9), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(chunks, st.data(), st.integers(1, 2000), st.integers(0, 20))
def test_online_attention_equals_the_documents(score_chunks, data, m, s):
    values = [[[data.draw(st.integers(-128, 127)) for _ in range(3)] for _ in c] for c in score_chunks]
    state, partial = N.ONLINE_START, [0, 0, 0]
    for c, v in zip(score_chunks, values):
        weights, alpha, state = N.online_softmax_step(c, state)
        high, low = N.weight_digits(weights)
        partial = N.rescale_add(partial, alpha, [sum(h * row[j] for h, row in zip(high, v)) for j in range(3)],
                                [sum(lo * row[j] for lo, row in zip(low, v)) for j in range(3)])
    assert N.normalise(partial, state[1], m, s) == doc_attention(score_chunks, values, m, s)


# Each weight is within WEIGHT_ERROR of 4095 e^(-d/64) (d its distance from the chunk's running maximum): exp64
# is within half of 1/65536 (4095/65536 of it in weight steps), and the weight's own rounding adds half a step.
WEIGHT_ERROR = 0.5 + 0.5 * 4095 / 65536
# Each alpha is within half of 1/65536 of e^(-d/64) (d how far the maximum moved).
ALPHA_ERROR = 0.5 / 65536


def softmax_error_bound(tokens, chunks):
    """The largest distance, in shares of one, between a token's final weight over the running sum and its exact
    softmax, for ``tokens`` scores in ``chunks`` chunks. A final weight f_i (its weight times the later alphas)
    is within e = WEIGHT_ERROR + (chunks - 1) * 4095 * ALPHA_ERROR of the exact E_i = 4095 e^(-(max - x_i)/64);
    the running sum S, whose every chunk rounds its rescaled sum once, is within d = tokens * e + (chunks - 1) / 2
    of sum(E); and S >= 4095 (the maximum's own weight, which no later alpha shrinks). So
    |f_i / S - E_i / sum(E)| <= (|f_i - E_i| sum(E) + E_i |sum(E) - S|) / (S sum(E)) <= (e + d) / 4095."""
    e = WEIGHT_ERROR + (chunks - 1) * 4095 * ALPHA_ERROR
    return (e + tokens * e + (chunks - 1) / 2) / 4095


@settings(max_examples=200, deadline=None)
@given(chunks)
@example([[0] * 8 + [573]])            # eight weights of 0.53 of a step each round to 0: 4.23 steps off
def test_weights_track_exact_softmax(score_chunks):
    """Each chunk's weights and alpha are within their roundings of the exact exponentials, and every token's
    final weight (its chunk weight times the later alphas) over the running sum is within the bound those
    roundings imply (``softmax_error_bound``) of the exact softmax of the scores (as logits x / 64)."""
    state, finals = N.ONLINE_START, []
    for c in score_chunks:
        old_max = state[0]
        weights, alpha, state = N.online_softmax_step(c, state)
        mx = max([old_max] + c)
        assert all(abs(w - 4095 * math.exp((x - mx) / 64)) <= WEIGHT_ERROR for w, x in zip(weights, c))
        assert abs(alpha / 65536 - math.exp((old_max - mx) / 64)) <= ALPHA_ERROR
        finals = [f * alpha / 65536 for f in finals] + [float(w) for w in weights]
    flat = [x for c in score_chunks for x in c]
    exact = np.exp((np.array(flat) - max(flat)) / 64)
    exact /= exact.sum()
    got = np.array(finals) / state[1]
    assert np.max(np.abs(got - exact)) <= softmax_error_bound(len(flat), len(score_chunks)) + 1e-12
    assert state[0] == max(flat) and max(weights) <= N.WEIGHT_MAX


def test_the_softmax_bound_is_nearly_reached():
    """The bound is not loose where it matters: the chunk above, where eight tokens each lose 0.53 of a step,
    reaches more than three quarters of it (4.23 of 5.31 steps)."""
    state = N.ONLINE_START
    weights, _, state = N.online_softmax_step([0] * 8 + [573], state)
    exact = np.exp((np.array([0] * 8 + [573]) - 573) / 64)
    error = abs(weights[-1] / state[1] - 1 / exact.sum())
    assert 0.75 * softmax_error_bound(9, 1) < error <= softmax_error_bound(9, 1)


def test_partial_outputs_fit_int32_at_the_longest_context():
    """All 4,096 scores equal (every weight 4095) and every value 127: the largest partial output, in int32."""
    state, partial = N.ONLINE_START, [0]
    for _ in range(N.ONLINE_MAX_CTX // 64):
        weights, alpha, state = N.online_softmax_step([0] * 64, state)
        high, low = N.weight_digits(weights)
        partial = N.rescale_add(partial, alpha, [127 * sum(high)], [127 * sum(low)])
    assert partial[0] == 127 * state[1] < 2 ** 31 and state[1] == 4095 * N.ONLINE_MAX_CTX


def test_scores_keep_a_peaked_heads_range():
    assert N.scale_score(10 ** 6, 1, 0) == N.SCORE_MAX and N.scale_score(-10 ** 6, 1, 0) == N.SCORE_MIN
    assert N.scale_score(-3, 1, 1) == -1 and N.scale_score(3, 1, 1) == 2       # ties towards +infinity
    with pytest.raises(ValueError):
        N.online_softmax_step([], N.ONLINE_START)
    with pytest.raises(ValueError):
        N.normalise([1], 0, 1, 0)


def test_integer_attention_against_float():
    """One head, d = 64, 1,000 tokens in chunks of 64: within a few output LSBs of float attention."""
    q, K, V = head_workload(1000, 64, 5)
    ref = float_attention(q, K, V)
    so = float(np.max(np.abs(ref))) / 127
    out8, details = integer_attention(q, K, V, so)
    assert np.max(np.abs(np.array(out8) - ref / so)) < 4
    assert details["sum"] >= N.WEIGHT_MAX


def test_online_accuracy_rows():
    rows = online_accuracy([16, 300], d=16, seeds=(0,), chunk=32)
    assert [(r["workload"], r["length"]) for r in rows] == [("random", 16), ("random", 300), ("peaked", 16),
                                                           ("peaked", 300)]
    for r in rows:
        assert 0 <= r["mean_lsb"] <= r["max_lsb"] < 8 and 0 < r["rms_rel"] < 0.1 and r["values"] == 16


def test_accuracy_online_command(tmp_path, capsys):
    import json
    from ga2_cli import main
    out = tmp_path / "a.json"
    assert main(["accuracy", "--online", "--d", "16", "--lengths", "16,200", "--seeds", "0",
                 "--json", str(out)]) == 0
    assert "long-context numerics against float attention" in capsys.readouterr().out
    rows = json.loads(out.read_text())["rows"]
    assert [(r["workload"], r["length"], r["chunk"]) for r in rows] == [
        ("random", 16, 64), ("random", 200, 64), ("peaked", 16, 64), ("peaked", 200, 64)]
    assert all({"max_lsb", "mean_lsb", "rms_rel"} <= set(r) for r in rows)
    assert main(["accuracy", "--online", "--d", "16", "--lengths", "40", "--seeds", "0", "--key-digits", "2",
                 "--json", str(out)]) == 0
    assert "wide keys (15 bits, two int8 digits)" in capsys.readouterr().out
    wide = json.loads(out.read_text())
    assert wide["key_digits"] == 2 and all(r["key_digits"] == 2 for r in wide["rows"])
    assert main(["accuracy", "--key-digits", "2"]) == 2
    assert "--key-digits goes with --online" in capsys.readouterr().err
    assert main(["accuracy", "--online", "--key-digits", "3"]) == 2
    assert "--key-digits" in capsys.readouterr().err
    assert main(["accuracy", "--online", "--lengths", "4097"]) == 2
    assert "argument --lengths: must be comma-separated whole numbers in 1..4096" in capsys.readouterr().err


def test_wide_key_digits_cover_the_range():
    """Every wide key is 128 hi + lo with int8 digits, hi in -127..127 and lo in -64..63; one past either end is
    refused; quantising saturates there."""
    for k in range(-N.WIDE_KEY_MAX, N.WIDE_KEY_MAX + 1):
        hi, lo = N.wide_key_digits(k)
        assert 128 * hi + lo == k and -127 <= hi <= 127 and -64 <= lo <= 63
    for k in (-N.WIDE_KEY_MAX - 1, N.WIDE_KEY_MAX + 1):
        with pytest.raises(ValueError):
            N.wide_key_digits(k)
    assert N.WIDE_KEY_MAX == 127 * 128
    assert N.quantize(1e9, 1.0, N.WIDE_KEY_MAX) == N.WIDE_KEY_MAX and N.quantize(-2.5, 1.0, N.WIDE_KEY_MAX) == -3
    assert N.scale_for([0.5, -2.0], N.WIDE_KEY_MAX) == 2.0 / N.WIDE_KEY_MAX


def test_wide_keys_cut_a_peaked_heads_error():
    """Peaked heads (logits over tens of units) at 1,000 tokens: wide keys cut the output's error against float
    attention (the int8 keys' rounding is most of it), and random heads lose nothing."""
    int8_keys, wide_keys = (online_accuracy([1000], d=64, seeds=(0, 1), workloads=("peaked",), key_digits=kd)[0]
                            for kd in (1, 2))
    assert wide_keys["key_digits"] == 2
    assert wide_keys["mean_lsb"] < 0.85 * int8_keys["mean_lsb"] and wide_keys["rms_rel"] < 0.85 * int8_keys["rms_rel"]
    assert wide_keys["max_lsb"] <= 4
    random8, random_wide = (online_accuracy([300], d=64, seeds=(0,), workloads=("random",), key_digits=kd)[0]
                            for kd in (1, 2))
    assert random_wide["mean_lsb"] <= random8["mean_lsb"] * 1.05
    with pytest.raises(ValueError, match="1 or 2"):
        integer_attention(*head_workload(4, 4, 0), 1.0, key_digits=3)


def test_error_budget_separates_the_sources():
    """The budget's rows: with exact q, K, V the chip's widths (1/64-logit scores, 12-bit weights) err far less
    than the chapter's (1/16, 7 bits) at a long context; the command refuses --budget without --online."""
    from ga2_sw.analyses.long_context import BUDGET_VARIANTS, error_budget
    from ga2_cli import main
    rows = error_budget([2000], d=32, seeds=(0, 1), workloads=("peaked",))
    by = {r["variant"]: r for r in rows}
    assert [r["variant"] for r in rows] == [v[0] for v in BUDGET_VARIANTS]
    chapter = by["1/16-logit scores, 7-bit weights (exact q, K, V)"]
    chip = by["1/64-logit scores, 12-bit weights (exact q, K, V)"]
    assert chip["mean_lsb"] < chapter["mean_lsb"] / 3 and chip["max_lsb"] < 2
    # on a peaked head the int8 keys' rounding is much of the error: wide keys take off a fifth of it or more
    int8_keys, wide_keys = by["int8 q, K, V only"], by["int8 q, V, wide K only"]
    assert wide_keys["mean_lsb"] < 0.8 * int8_keys["mean_lsb"]
    assert main(["accuracy", "--budget"]) == 2
