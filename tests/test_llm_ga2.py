"""The GA-2 path of SmolLM2-135M (ga2_sw.llm.ga2_path): its numpy integer functions
(``vector_numerics``) against ``ga2_sw.numerics``, the plain-Python functions the reference machine runs (proven
against docs/LONG_CONTEXT.md's own rendering in test_long_context.py); the chip's projection program, on the
reference machine and on Verilator, against the path on the real model's weights; and the path against the
float reference on text it was not calibrated on."""

import json

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ga2_sw import numerics as N
from ga2_sw.config import Config
from ga2_sw.llm import vector_numerics as V
from ga2_sw.llm.programs import projection_config, projection_program
from ga2_sw.machine import run

int32 = st.integers(-(1 << 31), (1 << 31) - 1)
multiplier = st.integers(1, (1 << 15) - 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(int32, min_size=1, max_size=20), multiplier, st.integers(0, N.MAX_SHIFT))
def test_requant_and_scale_score_equal_the_reference(a, m, s):
    assert V.requant(np.array(a), m, s).tolist() == [N.requant(x, m, s) for x in a]
    assert V.scale_score(np.array(a), m, s).tolist() == [N.scale_score(x, m, s) for x in a]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=20), st.floats(1e-3, 1e3))
def test_quantize_equals_the_reference(x, scale):
    assert V.quantize(np.array(x), scale).tolist() == [N.quantize(v, scale) for v in x]


def test_quantize_rounds_ties_away_from_zero():
    assert V.quantize(np.array([0.5, -0.5, 1.5, -1.5, 2.49, 300.0, -300.0]), 1.0).tolist() == \
        [1, -1, 2, -2, 2, 127, -127]


def test_int_matmul_is_exact_at_the_extremes():
    """A dot product of 4,096 products of -128 x -128: 2**26, beyond float32's integers, exact in float64."""
    a = np.full((2, 4096), -128)
    b = np.full(4096, -128)
    b[0] = 127
    assert V.int_matmul(a, b).tolist() == [sum(int(x) * int(y) for x, y in zip(a[0], b))] * 2


def reference_partials(q8, K8, V8, sm, ss, chunk):
    """One head at a time, chunk by chunk, with ga2_sw.numerics' functions on Python ints: the running outputs
    and sums after the last chunk."""
    out = []
    for h in range(len(q8)):
        scores = [N.scale_score(sum(int(a) * int(b) for a, b in zip(q8[h], k)), sm[h], ss[h]) for k in K8[h]]
        state, partial = N.ONLINE_START, [0] * len(q8[h])
        for c0 in range(0, len(scores), chunk):
            weights, alpha, state = N.online_softmax_step(scores[c0:c0 + chunk], state)
            high, low = N.weight_digits(weights)
            rows = V8[h][c0:c0 + chunk]
            partial = N.rescale_add(partial, alpha,
                                    [sum(w * int(r[j]) for w, r in zip(high, rows)) for j in range(len(partial))],
                                    [sum(w * int(r[j]) for w, r in zip(low, rows)) for j in range(len(partial))])
        out.append((partial, state[1]))
    return out


def reference_attention(q8, K8, V8, sm, ss, om, os_, chunk):
    return [N.normalise(p, total, om[h], os_[h]) for h, (p, total) in enumerate(reference_partials(q8, K8, V8, sm, ss,
                                                                                                  chunk))]


def _partials(q8, K8, V8, sm, ss, om, os_, chunk):
    partial, total = V.online_partials(q8, K8, V8, sm, ss, chunk)
    return [(p, t) for p, t in zip(partial.tolist(), total.tolist())]


@st.composite
def attention_case(draw):
    H, L, d = draw(st.integers(1, 3)), draw(st.integers(1, 140)), draw(st.integers(1, 5))
    chunk = draw(st.sampled_from([1, 3, 16, 64]))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    # a spread of score scalings: from scores that sit within a few units to ones far past the exp table
    sm = [draw(st.integers(1, 30000)) for _ in range(H)]
    ss = [draw(st.integers(0, 20)) for _ in range(H)]
    om = [draw(multiplier) for _ in range(H)]
    os_ = [draw(st.integers(0, 30)) for _ in range(H)]
    lo = draw(st.sampled_from([-128, -3, 0]))
    return (rng.integers(lo, 128, (H, d)), rng.integers(lo, 128, (H, L, d)), rng.integers(-128, 128, (H, L, d)),
            sm, ss, om, os_, chunk)


@settings(max_examples=150, deadline=None)
@given(attention_case())
def test_online_attention_equals_the_reference(case):
    assert _partials(*case) == reference_partials(*case[:5], case[-1])
    assert V.online_attention(*case).tolist() == reference_attention(*case)


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_online_attention_on_a_rising_context(chunk):
    """Scores that climb a unit or a few per token: every chunk raises the running maximum a little, so every
    rescaling multiplies by an alpha strictly between 0 and 1 (random cases mostly meet 0 or 1)."""
    L = 250
    q8 = np.array([[1, 0], [2, 1]])
    K8 = np.array([[[(l % 255) - 127, 5] for l in range(L)]] * 2)
    V8 = np.array([[[(3 * l) % 256 - 128, 127 - l % 100] for l in range(L)]] * 2)
    case = (q8, K8, V8, [1, 3], [0, 1], [16384, 20000], [15, 16], chunk)
    assert _partials(*case) == reference_partials(*case[:5], case[-1])
    assert V.online_attention(*case).tolist() == reference_attention(*case)


@st.composite
def causal_case(draw):
    """A text's queries, keys and values (n positions; KV key/value heads, each shared by G query heads), each
    position with its own score scalings; keys up to the wide keys' range."""
    KV, G, n, d = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 100)), draw(st.integers(1, 5))
    chunk = draw(st.sampled_from([1, 3, 16, 64]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    key_limit = draw(st.sampled_from([127, N.WIDE_KEY_MAX]))
    return (rng.integers(-127, 128, (n, KV * G, d)), rng.integers(-key_limit, key_limit + 1, (n, KV, d)),
            rng.integers(-128, 128, (n, KV, d)), rng.integers(1, 30000, (n, KV * G)), rng.integers(0, 28, (n, KV * G)),
            chunk)


@settings(max_examples=100, deadline=None)
@given(causal_case())
def test_a_text_s_attention_at_once_is_each_position_s(case):
    """``causal_partials`` (every position of a text at once, ``ga2 llm eval``'s) against ``online_partials`` of
    each position alone over the keys up to its own, each query head given its shared head's rows."""
    q8, K8, V8, sm, ss, chunk = case
    partial, total = V.causal_partials(*case)
    shared = np.arange(q8.shape[1]) // (q8.shape[1] // K8.shape[1])
    for p in range(len(q8)):
        want = V.online_partials(q8[p], K8[:p + 1].transpose(1, 0, 2)[shared], V8[:p + 1].transpose(1, 0, 2)[shared],
                                 sm[p], ss[p], chunk)
        assert partial[p].tolist() == want[0].tolist() and total[p].tolist() == want[1].tolist()


def test_online_attention_refuses_what_int64_cannot_hold():
    q, K = np.zeros((1, 2), dtype=np.int64), np.zeros((1, 4097, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="4,096"):
        V.online_attention(q, K, K, [1], [0], [1], [0], 64)
    with pytest.raises(ValueError, match="to 36"):
        V.online_attention(q, K[:, :4], K[:, :4], [1], [0], [1], [37], 64)


def test_projection_program_on_the_machine():
    """The projection program's layout and instruction fields, on random int8 data, in both modes."""
    rng = np.random.default_rng(7)
    w, x = rng.integers(-128, 128, (8, 100)), rng.integers(-128, 128, 100)
    for mode in ("inorder", "decoupled"):
        cfg = projection_config(Config(mode=mode), 8, 100)
        program, ext, out = projection_program(cfg, w, x, 300, 14)
        r = run(program, cfg, ext)
        assert r.ok
        assert [N.s8(v) for v in r.ext[out:out + 8]] == [N.requant(int(v), 300, 14) for v in w @ x]
        # two digit rows: the int32 sums of each, side by side per weight row
        xs = rng.integers(-128, 128, (2, 100))
        program, ext, out = projection_program(projection_config(cfg, 8, 100, 2), w, xs)
        r = run(program, cfg, ext)
        assert r.ok and [N.s32(v) for v in r.ext[out:out + 16]] == [int(v) for v in (w @ xs.T).reshape(-1)]
        with pytest.raises(ValueError, match="one input row"):
            projection_program(cfg, w, xs, 300, 14)


def test_input_digits_stand_for_the_input():
    """The projections' 15-bit input as two int8 digits (``ga2_path.input_digits``), in plain Python: every
    integer to INPUT_LIMIT is 128 high + low with both digits int8 and |low| <= 64."""
    from ga2_sw.llm.ga2_path import INPUT_RADIX, input_digits
    x = np.arange(-127 * 128, 127 * 128 + 1)
    high, low = input_digits(x)
    assert all(INPUT_RADIX * int(h) + int(lo) == int(v) for h, lo, v in zip(high, low, x))
    assert np.abs(high).max() == 127 and np.abs(low).max() == 64


# -- the real model ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ga2(model):
    from ga2_sw.llm.ga2_path import Ga2Model, calibrate
    return Ga2Model(model, calibrate(model))


def test_a_calibration_is_kept_and_read_back(model, tmp_path, monkeypatch):
    """``calibrate`` keeps the peaks it measured in the cache and reads them back the next time, without
    running the float reference, equal in every value and type; other prompts are another calibration."""
    from ga2_sw.llm.ga2_path import _Recorder, calibrate
    from ga2_sw.llm.scores import PROMPTS
    monkeypatch.setenv("GA2_CACHE", str(tmp_path))
    first = calibrate(model, PROMPTS[:1])
    assert len(list(tmp_path.glob("llm/calibration-*.npz"))) == 1

    def not_run(self, tokens, cache=None):
        raise AssertionError("the float reference ran")
    monkeypatch.setattr(_Recorder, "prefill", not_run)
    again = calibrate(model, PROMPTS[:1])
    assert again.peaks.keys() == first.peaks.keys() and again.prompts == first.prompts
    assert all(np.array_equal(again.peaks[k], v) and again.peaks[k].dtype == v.dtype for k, v in first.peaks.items())
    assert all(np.array_equal(getattr(again, k), getattr(first, k)) for k in ("x", "v_proj", "k_cache", "out"))
    with pytest.raises(AssertionError, match="the float reference ran"):
        calibrate(model, PROMPTS[1:2])


def _real_projection(model, ga2, block):
    """Block ``block``'s value projection of one real token: (config, program, ext, out address, expected
    values of key/value head 0 as the path computes them: with two input digits the int32 sums of each digit
    row, side by side, which the host combines; with one the int8 values of the chip's RQ)."""
    from ga2_sw.llm.float_model import FloatModel
    ref = FloatModel(model)
    x = model.weights["token_embd.weight"][model.encode(" lighthouse")[0]].astype(np.float32)
    h = ref._norm(x, model.weights[f"blk.{block}.attn_norm.weight"])
    x8, x_scale = ga2.quantised_input(block, h)
    w8 = ga2.w8[block, "v"][0]
    cfg = projection_config(Config(mode="decoupled"), len(w8), x8.shape[1], ga2.digits)
    if ga2.digits == 2:
        program, ext, out = projection_program(cfg, w8, x8)
        return cfg, program, ext, out, ga2.digit_sums(block, "v", x8)[:, 0].T.reshape(-1).tolist()
    m, s = ga2.value_requant(block, x_scale)[0]
    program, ext, out = projection_program(cfg, w8, x8, m, s)
    return cfg, program, ext, out, ga2.values(block, x8, x_scale)[0].tolist()


@pytest.fixture(scope="module")
def ga2_one_digit(model, ga2):
    from ga2_sw.llm.ga2_path import Ga2Model
    return Ga2Model(model, ga2.cal, digits=1, int32_sums=False)


@pytest.mark.parametrize("block", [0, 17, 29])
def test_value_projection_on_the_machine_equals_the_path(model, ga2, ga2_one_digit, block):
    """Both input forms: the two digit rows' int32 sums (the default path's) and the one-digit path's int8
    values requantised on the chip."""
    for path, word in ((ga2, N.s32), (ga2_one_digit, N.s8)):
        cfg, program, ext, out, expected = _real_projection(model, path, block)
        r = run(program, cfg, ext)
        assert r.ok and [word(v) for v in r.ext[out:out + len(expected)]] == expected
        assert len(set(expected)) > 10                      # a real spread of values, not a saturated row


@pytest.mark.slow
def test_value_projection_on_verilator_equals_the_machine(model, ga2):
    from sim.backends import get_backend
    from sim.compare import compare_results
    backend = get_backend("verilator")
    if not backend.available():
        pytest.skip(backend.unavailable_reason())
    cfg, program, ext, out, expected = _real_projection(model, ga2, 17)
    ref = run(program, cfg, ext)
    got = backend.run(cfg, program, ext)
    assert compare_results(ref, got) == []
    assert [N.s32(v) for v in got.ext[out:out + len(expected)]] == expected


def test_ga2_path_answers_paris(model, ga2):
    assert model.decode(ga2.generate("The capital of France is", 2)) == " Paris."


def test_a_text_at_once_is_the_path_s_steps(model, ga2):
    """``text_logits`` (a whole text block by block, every position's products at once: ``ga2 llm eval``'s) against
    the steps of one token at a time, over 66 tokens (the online softmax's second chunk of 64 included): on the
    GA-2 path the same logits to the bit, the head's candidates and all; on the float model the same within the
    rounding of float32 sums added in another order."""
    from ga2_sw.llm.float_model import FloatModel
    from ga2_sw.llm.texts import EVAL_TEXT
    tokens = model.encode(EVAL_TEXT)[:66]
    for path in (ga2, FloatModel(model)):
        cache = path.new_cache()
        steps = np.stack([path.step(t, p, cache) for p, t in enumerate(tokens)])
        at_once = path.text_logits(tokens)
        assert at_once.shape == steps.shape == (66, model.config.vocab) and at_once.dtype == steps.dtype
        if path is ga2:
            assert np.array_equal(at_once, steps)
        else:
            assert np.abs(at_once - steps).max() < 1e-3 * np.abs(steps).max()
            assert np.array_equal(at_once.argmax(axis=1), steps.argmax(axis=1))


def test_a_text_at_once_shows_its_hook_every_step(model, ga2, monkeypatch):
    """With a hook on the attention (``on_attention``: what ``ga2 llm steps`` samples) a text at once still gives
    its steps' logits, the hook called at every block and position as the steps call it."""
    tokens = model.encode("The capital of France is")
    cache = ga2.new_cache()
    steps = np.stack([ga2.step(t, p, cache) for p, t in enumerate(tokens)])
    seen = []
    monkeypatch.setattr(ga2, "on_attention", lambda b, pos, *rest: seen.append((b, pos)))
    assert np.array_equal(ga2.text_logits(tokens), steps)
    assert seen == [(b, p) for b in range(model.config.blocks) for p in range(len(tokens))]


def test_prompts_stepped_together_are_each_alone(model, ga2, monkeypatch):
    """``generate_batch`` (``ga2 llm eval``'s greedy pairs: the prompts' steps together, the GA-2 path's prompt
    read at once) against each prompt's greedy tokens a step at a time (``generate`` with the float model's
    prefill, a token at a time); one sequence stops early on a token of its own continuation while the others go
    on."""
    from ga2_sw.llm.float_model import FloatModel
    prompts = ["The capital of France is", "Water boils at", "List three colours:"]
    together, at_once = ga2.generate_batch(prompts, 5, set()), [ga2.generate(p, 5, set()) for p in prompts]
    monkeypatch.setattr(ga2, "prefill", lambda tokens, cache=None: FloatModel.prefill(ga2, tokens, cache))
    alone = [ga2.generate(p, 5, set()) for p in prompts]
    assert together == at_once == alone
    stop = {alone[1][2]}
    want = [ga2.generate(p, 5, stop) for p in prompts]
    assert len(want[1]) < 5 and any(len(w) == 5 for w in want)
    monkeypatch.undo()
    assert ga2.generate_batch(prompts, 5, stop) == want


def test_a_batch_s_steps_are_each_alone(model, ga2, monkeypatch):
    """``step_batch`` of sequences at different positions, each on its own cache: each row the logits of its
    step alone, to the bit; and ``generate_batch`` gives each step the position after its sequence's last."""
    prompts = ["The capital of France is", "Water boils at"]
    prefilled = [ga2.prefill(model.encode(p)) for p in prompts]
    copies = [[(list(k), list(v)) for k, v in cache] for _, cache in prefilled]
    tokens = [int(np.argmax(logits)) for logits, _ in prefilled]
    lengths = [len(model.encode(p)) for p in prompts]
    rows = ga2.step_batch([(t, n, cache) for t, n, (_, cache) in zip(tokens, lengths, prefilled)])
    for row, t, n, cache in zip(rows, tokens, lengths, copies):
        assert np.array_equal(row, ga2.step(t, n, cache))
    seen, batch = [], ga2.step_batch
    monkeypatch.setattr(ga2, "step_batch", lambda items: seen.append([p for _, p, _ in items]) or batch(items))
    ga2.generate_batch(prompts, 3, set())
    assert seen == [[n + i for n in lengths] for i in range(3)]


def test_the_path_refuses_a_text_at_once_on_a_simulator(model, ga2, monkeypatch):
    monkeypatch.setattr(ga2, "products", lambda kind, w8, rows, where: None)
    with pytest.raises(ValueError, match="a step at a time"):
        ga2.text_logits(model.encode("The capital of France is"))


def test_continuous_batching_serves_each_prompt_its_own_tokens(model, ga2):
    """Two prompts of different lengths served together, the second joining late: each gets exactly the tokens
    it gets alone (``Ga2Model.generate``), and each step is timed by the chip's programs of its batch."""
    from ga2_sw.llm.serving import requests_from_prompts, serve
    from ga2_sw.llm.step_cycles import StepCycles
    prompts = ["The capital of France is", "Water boils at a temperature of"]
    requests = requests_from_prompts(model, prompts, 4, arrival_gap=3)
    stop = {model.special["eos"], model.special["im_end"]}
    steps = serve(ga2, requests, 2, stop, StepCycles(4))
    for prompt, r in zip(prompts, requests):
        assert r.generated == ga2.generate(prompt, 4, stop=stop)
    assert requests[1].joined == 3 and {len(s["requests"]) for s in steps} == {1, 2}
    assert all(s["cycles"] > 0 and s["kv"] > 0 for s in steps)


def _eval(model_file, monkeypatch, tmp_path, *extra, tokens=48, model=None):
    """``ga2 llm eval`` with ``extra`` options; with ``model``, the command takes that already loaded model
    instead of reading the file again (the same ``gguf_model.load`` built it)."""
    from ga2_cli import main
    monkeypatch.setenv("GA2_SMOLLM2_GGUF", str(model_file))
    if model is not None:
        monkeypatch.setattr("ga2_sw.llm.gguf_model.load", lambda path=None: model)
    out = tmp_path / "eval.json"
    assert main(["llm", "eval", "--tokens", str(tokens), "--json", str(out), "--no-progress", *extra]) == 0
    return json.loads(out.read_text())


def test_eval_command_tracks_the_float_model(model_file, model, monkeypatch, tmp_path, capsys):
    """``ga2 llm eval`` on the first 20 tokens of its text: the GA-2 path agrees with the float model on the
    next token and its perplexity is close (measured on all 518 tokens: docs/LLM.md)."""
    plot = tmp_path / "eval.png"
    r = _eval(model_file, monkeypatch, tmp_path, "--generate-tokens", "0", "--plot", str(plot),
              tokens=20, model=model)
    assert r["tokens"] == 19 and r["top1_agreement"] >= 0.85 and r["weights_on_chip_fraction"] == 1.0
    per = r["per_token"]
    assert len(per["nll_float"]) == len(per["nll_ga2"]) == len(per["agree"]) == 19
    assert sum(per["agree"]) == round(19 * r["top1_agreement"])
    assert plot.stat().st_size > 10_000
    assert r["perplexity_ratio"] <= 1.10 and r["kl_float_to_ga2"] < 0.05
    assert r["generation"] == []
    text = capsys.readouterr().out
    assert "top-1 agreement" in text and "perplexity" in text
    assert r["key_digits"] == 2 and "wide keys" in text and "cycles_per_token" not in r
    assert r["head_candidates"] == 16 and "the LM head's best 16 candidates again at 15 bits" in text
    assert r["smoothing"] == 0.5 and r["linear_smoothing"] is None and "(after the attention none)" in text


@pytest.mark.slow
def test_eval_command_prints_the_chips_cost_per_token(model_file, monkeypatch, tmp_path, capsys):
    """With ``--cycles``, the attention programs' cost per token beside the accuracy (`ga2 llm cycles`): 4x4 and
    8x8, batch 1 and full; and the greedy continuations of both models."""
    r = _eval(model_file, monkeypatch, tmp_path, "--generate-tokens", "1", "--cycles")
    cycles = r["cycles_per_token"]
    assert {(c["chip"], c["batch"], c["context"]) for c in cycles} == {
        (chip, b, L) for chip, bs in (("4x4", (1, 4)), ("8x8", (1, 4, 8))) for b in bs for L in (64, 1024)}
    assert [g["prompt"] for g in r["generation"]][0] == "The capital of France is"
    assert r["generation"][0]["ga2"].startswith(" Paris")
    assert "cycles/token" in capsys.readouterr().out


def test_attention_steps_as_chip_programs(ga2):
    """Sampled steps of the GA-2 path (blocks 0 and 17, two sequences in one program, grouped-query
    heads) run as chip programs: the simulator's memory and counters are the reference machine's and the cycle
    model's, its outputs the path's (`ga2 llm steps` runs 20 on Verilator)."""
    from ga2_sw.llm.chip_steps import capture
    from sim.llm_attention import run_steps
    from sim.backends import get_backend
    steps = capture(ga2, 2, tokens=8, blocks=(0, 17))
    assert len(steps) == 2 and {s.prompt for s in steps} == {0, 1}
    assert all(s.K8.shape[0] == 3 and s.q8.shape[0] == 9 for s in steps)
    sim = "model" if get_backend("verilator").unavailable_reason() else "verilator"
    assert all(len(s.fine) == 9 and not np.array_equal(s.fine8, s.out8) for s in steps)
    rows = run_steps(steps, sim)
    assert len(rows) == 1 and rows[0]["heads"] == 18
    assert rows[0]["matches_model"] and rows[0]["matches_path"]


def test_wide_key_steps_as_chip_programs(model, ga2):
    """Wide keys on the real model (``Ga2Model``'s default, ``key_digits=2``): the key cache holds 15-bit keys
    (beyond int8) at the same calibrated peak, and a sampled step runs as a chip program of two digit planes
    with the path's outputs, both readings, on the reference machine and the cycle model."""
    from ga2_sw.llm.chip_steps import capture
    from sim.llm_attention import run_steps
    from ga2_sw.llm.ga2_path import Ga2Model
    wide = ga2                                                  # the path's keys by default
    narrow = Ga2Model(model, ga2.cal, key_digits=1, linears="float")
    [step] = capture(wide, 1, tokens=4, blocks=(17,))
    assert step.key_digits == 2 and np.abs(step.K8).max() > 127
    assert np.allclose(wide.k_scale * 128, narrow.k_scale)
    [row] = run_steps([step], "model")
    assert row["matches_model"] and row["matches_path"]
    with pytest.raises(ValueError, match="key_digits"):
        Ga2Model(model, ga2.cal, key_digits=3)


def _simulator():
    from sim.backends import get_backend
    return "model" if get_backend("verilator").unavailable_reason() else "verilator"


def test_the_step_s_attention_on_the_llm_chip_continues_from_the_simulator(ga2):
    """`ga2 llm generate --sim`: an attention step of the path run as the llm chip's scheduled grouped program
    (``ChipStepAttention``) gives the path's outputs, both readings, and counts it; a path whose numbers differ
    from the chip's is refused, naming the step (here the path's fine reading is tampered with)."""
    import dataclasses
    from ga2_sw.chips import config_of
    from ga2_sw.llm.chip_steps import capture
    from sim.llm_attention import ChipMismatch
    from sim.llm_step import ChipStepAttention
    [step] = capture(ga2, 1, tokens=4, blocks=(29,))
    chip = ChipStepAttention(_simulator(), config_of("llm"))
    out8, fine8 = chip(step)
    assert np.array_equal(out8, step.out8) and np.array_equal(fine8, step.fine8)
    assert chip.tally.programs == {"attention": 1} and chip.tally.total_cycles > 0
    bad = dataclasses.replace(step, fine8=step.fine8 + (step.fine8 < 100))
    with pytest.raises(ChipMismatch, match=f"block 29, positions {step.pos}, attention: the outputs of position "
                                           f"{step.pos} differ"):
        chip(bad)


def test_a_step_too_long_for_the_chip_whole_runs_by_its_key_value_heads(ga2):
    """``ChipStepAttention`` on an llm chip whose instruction memory holds 64 words: a real step's attention
    (three key/value heads, about 144 instructions whole) runs a program per key/value head, as
    ``whole_step.attention_pieces`` splits the step's, with the path's outputs (both readings) and the cycles the
    cycle model counts for those pieces."""
    from ga2_sw.chips import config_of
    from ga2_sw.llm.chip_steps import capture
    from ga2_sw.llm.whole_step import attention_pieces, program_counters
    from sim.llm_step import ChipStepAttention
    [step] = capture(ga2, 1, tokens=4, blocks=(29,))
    small = config_of("llm", imem_words=64)
    chip = ChipStepAttention("model", small)
    out8, fine8 = chip(step)
    assert np.array_equal(out8, step.out8) and np.array_equal(fine8, step.fine8)
    pieces = attention_pieces(small, [step.length], key_digits=step.key_digits)
    assert chip.tally.programs == {"attention": len(pieces)} == {"attention": 3}
    assert chip.tally.total_cycles == sum(program_counters(tuple(p), small)[0].cycles for _, p in pieces)


def test_the_step_s_products_on_the_llm_chip_give_the_path_s_sums(model, ga2, monkeypatch):
    """``ChipProducts``: the output projection of a real token as the step's own programs on the llm chip
    returns ChipLinear's int32 sums, one program a piece, counted, with int8 and with wide weights; a chip that
    reads a wrong weight is caught,
    naming the product and the rows (here the image the simulator is given has one weight changed)."""
    import sim.llm_step as llm_step
    from ga2_sw.chips import config_of
    from ga2_sw.llm.ga2_path import ChipLinear, fifteen_bit
    from sim.llm_attention import ChipMismatch
    name = "blk.3.attn_output.weight"
    lin = ga2.chip_linears[name]
    digits, _ = fifteen_bit(_linear_inputs(model, ga2)[name] / lin.smooth)
    chip = llm_step.ChipProducts(_simulator(), config_of("llm"))
    assert np.array_equal(chip("o", lin.w8, digits, name), lin.sums(digits))
    assert chip.tally.programs == {"o": 1} and chip.tally.total_cycles > 0
    # wide weights: the two planes streamed as one matrix of twice the rows
    wide = ChipLinear(ga2.w[name], ga2.cal.inputs[name], ga2.linear_smoothing, weight_digits=2)
    assert np.array_equal(chip("o", wide.w8, digits, name), wide.sums(digits)) and wide.w8.shape[0] == 1152
    image = llm_step.linear_image

    def one_weight_off(w, x, config):
        w = np.array(w)
        w[5, 7] = -w[5, 7] - 1
        return image(w, x, config)
    monkeypatch.setattr(llm_step, "linear_image", one_weight_off)
    with pytest.raises(ChipMismatch, match=f"{name}, rows 0..575: the stored sums differ"):
        chip("o", lin.w8, digits, name)


@pytest.mark.slow
def test_a_whole_step_of_two_sequences_on_verilator_is_the_path_s(model, ga2):
    """``ga2 llm generate --sim verilator``'s step: two sequences' first tokens as one whole step on the llm chip's
    Verilog (every product and attention its programs, the two sequences together): the logits are the path's bit
    for bit, and the cycles run are the cycle model's whole step, round trips aside (about five minutes)."""
    from ga2_sw.chips import config_of
    from ga2_sw.llm.ga2_path import Ga2Model
    from ga2_sw.llm.whole_step import StepTimer
    from sim.backends import get_backend
    from sim.llm_step import on_simulator
    if get_backend("verilator").unavailable_reason():
        pytest.skip(get_backend("verilator").unavailable_reason())
    llm = config_of("llm")
    chip = Ga2Model(model, ga2.cal)
    tally = on_simulator(chip, "verilator", llm)
    tokens = [model.encode(" lighthouse")[0], model.encode(" The")[0]]
    got = chip.step_batch([(t, 0, chip.new_cache()) for t in tokens])
    want = ga2.step_batch([(t, 0, ga2.new_cache()) for t in tokens])
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    timed = StepTimer(llm, key_digits=chip.key_digits, head_candidates=chip.head_candidates).step([1, 1])
    assert tally.total_cycles == timed["cycles"] - timed["host"]
    assert tally.programs == {"qkv": 30, "attention": 30, "o": 30, "gate": 30, "up": 30, "down": 30, "head": 8,
                              "rescore": 1}


def test_a_step_through_the_products_hook_is_the_path_s_step(model, ga2):
    """``Ga2Model.products`` (what ``--sim`` sets) sees every product of a step once, the step's own kinds and
    shapes (q, k and v as one ``qkv``, gate and up apart, as ``whole_step.block_products``; the LM head's
    candidates again, ``rescore``), and a hook that
    returns the exact integer sums leaves the step's logits bit for bit the path's."""
    import copy
    from ga2_sw.llm.whole_step import block_products, head_product
    hooked = copy.copy(ga2)                 # the same weights, a hook of its own
    seen = []

    def exact(kind, w8, rows, where):
        seen.append((kind, np.asarray(w8).shape))
        return np.asarray(rows, dtype=np.int64) @ np.asarray(w8).astype(np.int64).T
    hooked.products = exact
    token = model.encode(" lighthouse")[0]
    assert np.array_equal(hooked.step(token, 0, hooked.new_cache()), ga2.step(token, 0, ga2.new_cache()))
    want = [(p.name, (p.rows, p.cols)) for p in block_products()] * 30 + [("head", (49152, 576)),
                                                                            ("rescore", (16, 576))]
    assert sorted(seen) == sorted(want) and head_product().rows == 49152


def test_a_batch_meets_its_shared_weights_once_and_its_candidates_each():
    """``ChipProducts.gathered`` (``--sim``'s meeting of a batch's sequences at a product): a product whose
    weights the sequences share runs their rows once (each sequence's copy of them equal, not the same array),
    the LM head's candidates (``RESCORE``) run every sequence's rows even where two are alike; the programs are
    the ones ``whole_step`` times, each sequence's sums numpy's."""
    from ga2_sw.chips import config_of
    from ga2_sw.llm.whole_step import RESCORE, Product, linear_pieces, program_counters
    from sim.llm_step import ChipProducts
    llm = config_of("llm")
    rng = np.random.default_rng(14)
    w8, rows = rng.integers(-127, 128, (24, 64)), [rng.integers(-127, 128, (2, 64)) for _ in range(2)]

    def cycles(kind, n):
        return sum(program_counters(tuple(p), llm)[0].cycles
                   for _, _, p in linear_pieces(llm, 2, Product(kind, n, 64), digits=2))
    for kind, n in (("o", 24), (RESCORE, 48)):
        chip = ChipProducts("model", llm)
        got = chip.gathered(kind, [(w8.copy(), x) for x in rows], "test")
        assert all(np.array_equal(g, x @ w8.T) for g, x in zip(got, rows))
        assert chip.tally.programs == {kind: 1} and chip.tally.total_cycles == cycles(kind, n)


def test_generate_refuses_a_simulator_without_the_ga2_path(capsys):
    from ga2_cli import main
    assert main(["llm", "generate", "Hello", "--path", "float", "--sim", "verilator"]) == 2
    err = capsys.readouterr().err
    assert "--sim" in err and "--path ga2" in err and len(err.strip().splitlines()) == 1


def test_read_outputs_takes_the_fine_reading_inside_its_range():
    """The host's reading of the two NRMs (``ga2_path.read_outputs``), element by element in plain Python: the
    fine value where it is strictly inside -128..127 (a limit may be a clamp), else the coarse one."""
    from ga2_sw.llm.ga2_path import read_outputs
    coarse = np.array([[3, -3, 100, -100, 16, 0], [127, -128, 1, 2, -1, 5]])
    fine = np.array([[24, -23, 127, -128, 126, -127], [127, -128, 8, 17, -9, 40]])
    scales, fine_scales = np.array([0.5, 2.0]), np.array([0.0625, 0.25])
    got = read_outputs(coarse, fine, scales, fine_scales)
    for h in range(2):
        for j in range(6):
            f = int(fine[h, j])
            want = f * fine_scales[h] if -128 < f < 127 else int(coarse[h, j]) * scales[h]
            assert got[h, j] == np.float32(want), (h, j)
    assert got.dtype == np.float32


def test_block_cycle_programs():
    """`ga2 llm cycles`: the projection program computes the block's q, k sums and v int8 with one input row a
    token, and every sum of each digit row with two (machine, against numpy; 2 x 3 input rows take two MMs a
    tile on 4 rows); each row's cycles are the cycle model's of the two programs, never below the words they
    move."""
    import numpy as np
    from ga2_sw.isa import Op
    from ga2_sw.llm.step_cycles import _chip, block_cycles, projection_program
    from ga2_sw.machine import Machine
    from ga2_sw.numerics import s32, u32
    cfg = _chip(4).replace(sp_words=8192, ext_words=16384, imem_words=512)
    rng = np.random.default_rng(0)
    B, dm, q_rows, kv_rows = 3, 40, 8, 4
    rows = q_rows + 2 * kv_rows
    W, X = rng.integers(-127, 128, (rows, dm)), rng.integers(-127, 128, (B, dm))
    ext = [u32(int(v)) for v in W.reshape(-1)] + [u32(int(v)) for v in X.reshape(-1)]
    r = Machine(cfg).run(projection_program(cfg, B, dm, q_rows, kv_rows, v_mn=(3, 2), digits=1), ext)
    assert r.ok
    base = rows * dm + B * dm
    out = np.array([s32(w) for w in r.ext[base:base + B * rows]]).reshape(B, rows)
    sums = X @ W.T
    assert np.array_equal(out[:, :q_rows + kv_rows], sums[:, :q_rows + kv_rows])
    assert np.array_equal(out[:, q_rows + kv_rows:], np.clip((sums[:, q_rows + kv_rows:] * 3 + 2) >> 2, -128, 127))
    X2 = rng.integers(-127, 128, (2 * B, dm))                  # token b's digit rows: 2b and 2b + 1
    ext = [u32(int(v)) for v in W.reshape(-1)] + [u32(int(v)) for v in X2.reshape(-1)]
    program = projection_program(cfg, B, dm, q_rows, kv_rows)
    r = Machine(cfg).run(program, ext)
    base = rows * dm + 2 * B * dm
    out = np.array([s32(w) for w in r.ext[base:base + 2 * B * rows]]).reshape(2 * B, rows)
    assert r.ok and np.array_equal(out, X2 @ W.T)
    assert sum(i.op == Op.MM for i in program) == 2 * -(-rows // 4) and not any(i.op == Op.RQ for i in program)
    small = block_cycles(4, 2, 70)
    assert small["projection"] >= small["weights"] and small["attention"] >= small["kv"]
    assert small["weights"] == 15 * 64 * 576 and small["kv"] == 2 * 3 * 2 * 70 * 64
    wide = block_cycles(4, 2, 70, key_digits=2)         # two digit planes of K: 3/2 the cache's words
    assert wide["kv"] == 2 * 3 * 3 * 70 * 64
    assert wide["attention"] >= wide["kv"] and wide["attention"] > small["attention"]
    assert wide["projection"] == small["projection"]
    # The 4 x 4's 8 banks: the operands' rows spread over them (576 words apart, every slice would read all its
    # operands on one bank: 1.5 x the weights' words), the projections stay within 5% of their memory bound.
    four = block_cycles(4, 4, 64)
    assert four["weights"] <= four["projection"] <= 1.05 * four["weights"]


def test_cycles_command_refuses_a_chip_without_a_batch(capsys):
    from ga2_cli import main
    assert main(["llm", "cycles", "--sizes", "3", "--batches", "4,8"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--batches" in err and "3x3" in err and len(err.splitlines()) == 1


def test_cycles_command_tokens_per_second_at_a_given_clock(tmp_path, capsys):
    """`ga2 llm cycles --clock-mhz F`: tokens/s = F MHz / cycles per token, in the table's header and the JSON."""
    from ga2_cli import main
    out = tmp_path / "cycles.json"
    assert main(["llm", "cycles", "--sizes", "4", "--batches", "2", "--contexts", "64", "--clock-mhz", "83",
                 "--json", str(out), "--no-progress"]) == 0
    r = json.loads(out.read_text())
    [row] = r["rows"]
    assert r["clock_mhz"] == 83 and row["tokens_per_second"] == round(83e6 / row["cycles_per_token"], 3)
    assert "tokens/s at 83 MHz" in capsys.readouterr().out
    assert main(["llm", "cycles", "--sizes", "4", "--batches", "2", "--contexts", "64", "--key-digits", "2",
                 "--json", str(out), "--no-progress"]) == 0
    wide = json.loads(out.read_text())
    assert wide["key_digits"] == 2 and wide["rows"][0]["cycles_per_token"] > row["cycles_per_token"]
    assert "wide keys" in capsys.readouterr().out
    assert main(["llm", "cycles", "--key-digits", "0"]) == 2 and "--key-digits" in capsys.readouterr().err


def test_cycles_command_draws_the_plot(tmp_path, capsys):
    """`ga2 llm cycles --plot F.png` writes a PNG; a plot path in a missing folder is refused before any work."""
    from ga2_cli import main
    png = tmp_path / "cycles.png"
    assert main(["llm", "cycles", "--sizes", "4", "--batches", "1", "--contexts", "16,32", "--plot", str(png),
                 "--no-progress"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["llm", "cycles", "--plot", str(tmp_path / "missing" / "c.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--plot" in err and "missing" in err and len(err.splitlines()) == 1


def test_the_attention_table_quotes_no_fmax(tmp_path):
    """The attention-only table's chips are not placed (their memories exceed an ECP5's): its rows give
    tokens/s at the stated clock alone, that clock over the cycles per token."""
    from ga2_cli import main
    out = tmp_path / "cycles.json"
    assert main(["llm", "cycles", "--sizes", "4,8", "--batches", "4", "--contexts", "64", "--json", str(out),
                 "--no-progress", "--clock-mhz", "80"]) == 0
    data = json.loads(out.read_text())
    assert data["clock_mhz"] == 80
    for row in data["rows"]:
        assert not any("fmax" in key for key in row)
        assert row["tokens_per_second"] == round(80e6 / row["cycles_per_token"], 3)


# -- every other matrix product on the chip's numerics -------------------------------------------------------

def test_chip_linear_sums_are_exact_at_the_extremes():
    """``ChipLinear.sums`` (float32 products in chunks of 1,024 columns) against numpy's int64 product, which
    uses no BLAS: every weight and digit at its largest magnitude, over the widest input (1,536 columns, the
    down projection's), and random rows."""
    from ga2_sw.llm.ga2_path import ChipLinear
    rng = np.random.default_rng(11)
    lin = ChipLinear(np.ones((8, 1536)), np.ones(1536), smoothing=None)
    lin.w8 = np.where(rng.random((8, 1536)) < 0.5, -127, 127).astype(np.float32)
    lin.w8[0], lin.w8[1] = 127, -127
    digits = np.stack([np.full(1536, 127), rng.integers(-64, 65, 1536)])
    exact = lin.w8.astype(np.int64) @ digits.astype(np.int64).T
    assert exact[0, 0] == 1536 * 127 * 127 and (lin.sums(digits) == exact.T).all()
    digits = rng.integers(-127, 128, (2, 1536))
    assert (lin.sums(digits) == (lin.w8.astype(np.int64) @ digits.T).T).all()


@pytest.mark.parametrize("weight_digits, within", [(1, 0.02), (2, 0.001)])
def test_chip_linear_tracks_the_float_product(weight_digits, within):
    """A 15-bit input and int8 rows with a scale each (or wide weights: 15 bits, the step 1/128 of it), on random
    weights and an input with a few large channels: each output within the rounding bound worked out from the
    scales (half a weight step times the input's magnitudes, plus half an input step times the weights'), and
    within 2% (wide weights: 0.1%) of the largest float output."""
    from ga2_sw.llm.ga2_path import ChipLinear, INPUT_LIMIT
    rng = np.random.default_rng(5)
    w = rng.normal(size=(64, 576)).astype(np.float32)
    x = rng.normal(size=576).astype(np.float32)
    x[[3, 100, 400]] *= 40                                       # outlier channels, as real activations have
    lin = ChipLinear(w, np.abs(x), weight_digits=weight_digits)
    want = w.astype(np.float64) @ x
    xs, ws = x / lin.smooth, w * lin.smooth                      # the smoothed input and weights
    w_step = np.abs(ws).max(axis=1) / 127 / 128 ** (weight_digits - 1)
    x_step = np.abs(xs).max() / INPUT_LIMIT
    bound = w_step / 2 * np.abs(xs).sum() + x_step / 2 * np.abs(ws).sum(axis=1) * 1.01
    assert (np.abs(lin(x) - want) <= bound).all()
    assert np.abs(lin(x) - want).max() < within * np.abs(want).max()


def test_wide_weights_are_two_int8_planes_of_15_bit_weights():
    """``ChipLinear(weight_digits=2)``: what the chip streams is the high plane's rows then the low plane's, int8
    digits of the weights rounded (half away from zero) at 1/128 of the row's int8 step, worked out here in plain
    Python for every weight of a few rows; the host's combination of the planes' sums is the wide weights'
    exact integer product, and the matrix keeps its own shape."""
    from ga2_sw.llm.ga2_path import ChipLinear
    rng = np.random.default_rng(8)
    w = rng.normal(size=(6, 40)) * np.array([1, 3, 0.01, 1, 5, 1])[:, None]
    lin = ChipLinear(w, np.ones(40), smoothing=None, weight_digits=2)
    assert lin.shape == (6, 40) and lin.w8.shape == (12, 40)
    hi, lo = lin.w8[:6].astype(np.int64), lin.w8[6:].astype(np.int64)
    assert np.abs(hi).max() <= 127 and np.abs(lo).max() <= 64
    for r in range(6):
        step = max(abs(v) for v in w[r]) / 127 / 128
        for c in range(40):
            y = w[r, c] / step
            wide = int(math.copysign(math.floor(abs(y) + 0.5), y))
            assert hi[r, c] * 128 + lo[r, c] == wide, (r, c)
    rows = rng.integers(-127, 128, (2, 40))
    wide = hi * 128 + lo
    assert (lin.weight_sums(lin.sums(rows)) == (wide @ rows.T).T).all()


def test_the_head_s_candidates_take_fifteen_bit_weights():
    """``RescoredHead``: the residual plane is int8 (-64..64) and, with the int8 weights, makes 15-bit weights
    within half a step of 1/128 of each row's int8 step (worked out here from the float weights); the candidates
    are the rows of the largest int8 logits (numpy's full sort of ``ChipLinear``'s logits), their logits within
    the 15-bit weights' rounding bound of the float product, every other row's the int8 head's."""
    from ga2_sw.llm.ga2_path import ChipLinear, INPUT_LIMIT, RescoredHead
    rng = np.random.default_rng(12)
    w = rng.normal(size=(300, 64)) * rng.uniform(0.05, 2, (300, 1))
    x = rng.normal(size=64)
    head = RescoredHead(w, np.ones(64), None, candidates=10)
    int8 = ChipLinear(w, np.ones(64), None)
    assert np.abs(head.residual).max() <= 64 and np.array_equal(head.w8, int8.w8)
    step = np.abs(w).max(axis=1) / 127 / 128
    wide = head.w8.astype(np.float64) * 128 + head.residual
    assert (np.abs(wide * step[:, None] - w) <= step[:, None] * (0.5 + 1e-6)).all()
    coarse, got = int8(x), head(x)
    top = np.sort(np.argsort(-coarse.astype(np.float64), kind="stable")[:10])
    rest = np.setdiff1d(np.arange(300), top)
    assert np.array_equal(got[rest], coarse[rest]) and not np.array_equal(got[top], coarse[top])
    x_step = np.abs(x).max() / INPUT_LIMIT
    bound = step / 2 * np.abs(x).sum() + x_step / 2 * np.abs(w).sum(axis=1) * 1.01
    err = np.abs(got - w @ x)
    assert (err[top] <= bound[top]).all() and err[top].max() < err[rest].max() / 20


def test_the_head_s_candidates_from_a_simulator_hook():
    """The candidates' residual sums go through the ``rescore`` hook (a simulator in ``--sim``), given the
    candidates' rows of the residual plane; a hook that returns the exact sums leaves the logits as numpy's, and
    one whose high digit's sums are 1,000 more changes only the candidates' logits, each by 128,000 of its
    residual steps."""
    from ga2_sw.llm.ga2_path import INPUT_LIMIT, RescoredHead
    rng = np.random.default_rng(13)
    w, x = rng.normal(size=(200, 48)), rng.normal(size=48)
    head = RescoredHead(w, np.ones(48), None, candidates=8)
    seen = []

    def exact(w8, rows):
        seen.append(np.asarray(w8).shape)
        return np.asarray(rows, dtype=np.int64) @ np.asarray(w8, dtype=np.int64).T
    assert np.array_equal(head(x, rescore=exact), head(x)) and seen == [(8, 48)]
    off = head(x, rescore=lambda w8, rows: exact(w8, rows) + np.array([[1000], [0]]))
    moved = np.flatnonzero(off != head(x))
    x_scale = np.abs(x).max() / INPUT_LIMIT
    step = head.scale[moved] / 128 * x_scale
    assert len(moved) == 8 and np.allclose((off - head(x))[moved], 128_000 * step, rtol=1e-2)
    with pytest.raises(ValueError, match="candidates"):
        RescoredHead(w, np.ones(48), None, candidates=0)


def _linear_inputs(model, ga2, text=" lighthouse"):
    """Each ``FloatModel.linear`` input of one real token through the GA-2 path: {name: x}."""
    seen = {}
    run_linear = ga2.linear

    def spy(name, x):
        seen.setdefault(name, np.array(x))
        return run_linear(name, x)

    ga2.linear = spy
    try:
        ga2.step(model.encode(text)[0], 0, ga2.new_cache())
    finally:
        del ga2.linear
    return seen


@pytest.mark.parametrize("name", ["blk.3.attn_output.weight", "blk.3.ffn_gate.weight", "blk.3.ffn_up.weight",
                                  "blk.3.ffn_down.weight", "token_embd.weight"])
def test_every_other_product_on_the_machine_equals_the_path(model, ga2, name):
    """Eight rows of each kind of matrix the path puts on the chip besides q, k and v (the output projection,
    gate, up, down and the LM head), times a real token's input as its two digit rows: the reference machine's
    MM gives the path's int32 sums."""
    from ga2_sw.llm.ga2_path import fifteen_bit
    lin = ga2.chip_linears[name]
    x = _linear_inputs(model, ga2)[name]
    digits, _ = fifteen_bit(x / lin.smooth)
    rows = np.sort(np.random.default_rng(2).choice(lin.shape[0], 8, replace=False))
    w8 = lin.w8[rows].astype(np.int64)
    cfg = projection_config(Config(mode="decoupled", sp_words=16384), len(rows), lin.shape[1], 2)
    program, ext, out = projection_program(cfg, w8, digits)
    r = run(program, cfg, ext)
    expected = lin.sums(digits)[:, rows].T.reshape(-1).tolist()
    assert r.ok and [N.s32(v) for v in r.ext[out:out + len(expected)]] == expected
    assert len(set(expected)) > 4


@pytest.mark.parametrize("name", ["blk.3.attn_output.weight", "blk.3.ffn_down.weight", "token_embd.weight"])
def test_the_step_s_product_program_gives_the_path_s_sums(model, ga2, name):
    """The whole step's own program (``whole_step.linear_program`` on the llm chip: two digit rows, the int32 sums
    stored whole by ST wd) on 32 rows of a real matrix and a real token's input: the reference machine's sums are
    ``ChipLinear``'s, and the host's combination of them its product."""
    from ga2_sw.chips import config_of
    from ga2_sw.llm.ga2_path import combined, fifteen_bit
    from ga2_sw.llm.whole_step import Product, linear_image, linear_outputs, linear_program
    llm = config_of("llm")
    lin = ga2.chip_linears[name]
    digits, x_scale = fifteen_bit(_linear_inputs(model, ga2)[name] / lin.smooth)
    rows = np.sort(np.random.default_rng(3).choice(lin.shape[0], 32, replace=False))
    w8 = lin.w8[rows].astype(np.int64)
    program = linear_program(llm, 1, Product(name, 32, lin.shape[1]), digits=2, sums=True)
    r = run(program, llm, linear_image(w8, digits, llm))
    assert r.ok, r.error
    sums = linear_outputs(r.ext, llm, 2, 32, lin.shape[1], sums=True)
    assert np.array_equal(sums, lin.sums(digits)[:, rows])
    full = lin(_linear_inputs(model, ga2)[name])
    assert np.array_equal((combined(sums) * lin.scale[rows] * x_scale).astype(np.float32), full[rows])


def test_the_products_after_the_attention_take_their_input_unsmoothed(model, ga2, ga2_one_digit):
    """With a 15-bit input the products after the attention quantise it unsmoothed (their int8 weights keep
    their rows' range) while q, k and v keep SmoothQuant's factors; an int8 input smooths every product."""
    from ga2_sw.llm.ga2_path import SMOOTHING, Ga2Model, smoothing_factors
    name = "blk.3.ffn_down.weight"
    assert ga2.linear_smoothing is None and ga2.smoothing == SMOOTHING
    assert all(np.array_equal(lin.smooth, np.ones(lin.shape[1])) for lin in ga2.chip_linears.values())
    assert not np.allclose(ga2.smooth[3], 1)
    one = ga2_one_digit.chip_linears[name]
    assert ga2_one_digit.linear_smoothing == 0.5
    w = np.asarray(ga2.w[name], dtype=np.float64)
    assert np.array_equal(one.smooth, smoothing_factors(ga2.cal.inputs[name], w, 0.5))
    chosen = Ga2Model(model, ga2.cal, linear_smoothing=0.25).chip_linears[name]
    assert np.array_equal(chosen.smooth, smoothing_factors(ga2.cal.inputs[name], w, 0.25))


def test_every_weight_a_token_reads_is_on_the_chip(model, ga2):
    from ga2_sw.llm.ga2_path import Ga2Model
    assert ga2.weights_on_chip_fraction == 1.0
    host = Ga2Model(model, ga2.cal, linears="float")
    # q, k and v alone: 30 x (576 + 2 x 192) x 576 of the 134.5 M weights a token reads
    assert host.weights_on_chip_fraction == pytest.approx(30 * 960 * 576 / 134_479_872, rel=1e-6)
