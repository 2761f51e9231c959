"""The long-context instructions SMC, RSA and NRM (docs/ISA.md; the online unit, ga2_hdl/vector/online_unit.py).

The reference machine's words are held to a plain-Python rendering of docs/ISA.md's formulas written here
(exact rationals for every rounding, its own exp table); the chunk-loop program (ga2_sw.online_program) to
``ga2_sw.llm.vector_numerics.online_attention``, which computes the same attention with numpy over whole
arrays; the RTL to the reference machine on every simulator (here, and crowded random programs in
tests/test_differential.py)."""

import math
import random
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ga2_sw import isa
from ga2_sw.config import Config
from ga2_sw.cycles import accesses, cycle_counts, online_requests
from ga2_sw.isa import Err, Op
from ga2_sw.llm.vector_numerics import online_attention
from ga2_sw.machine import Machine
from ga2_sw.numerics import KEY_LIMIT, WIDE_KEY_MAX, mantissa_shift, nrm_word, rsa_word, s8, smc_words
from ga2_sw.chips import chip
from ga2_sw.layout import LayoutError
from ga2_sw.llm.whole_step import SCHEDULE, SCHEDULE_WINDOW
from ga2_sw.schedule import reorder
from ga2_sw.online_program import (Group, GroupedLayout, grouped_ext_image, grouped_layout, grouped_outputs,
                                     grouped_program)
from sim.backends import get_backend
from sim.compare import compare_results

ONLINE = Config(online_unit=1, sp_words=512, ext_words=512, imem_words=64)      # tests/test_differential's chip
WIDE = ONLINE.replace(wide_scores=1)                                             # with SMC's ws
WORDS = st.integers(0, 2**32 - 1)


def s32(w):
    return w - (1 << 32) if w >> 31 else w


def floor_half_up(x):
    """floor(x + 1/2) of a Fraction."""
    return math.floor(x + Fraction(1, 2))


def exp_q16(distance):
    """round(65536 * exp(-d / 64)) from the document, 0 from the end of the table (1,024 entries) on."""
    return 0 if distance >= 1024 else math.floor(65536 * math.exp(-distance / 64) + 0.5)


def document_smc(dots, max_word, sum_word, m, s):
    """SMC of docs/ISA.md on the int32 scores ``dots``: (high digits, low digits, new maximum, new sum, alpha)."""
    x = [max(-2**15, min(2**15 - 1, floor_half_up(Fraction(a * m, 2**s)))) for a in dots]
    old = s32(max_word)
    new = max([old] + x)
    w = [floor_half_up(Fraction(exp_q16(new - v) * 4095, 65536)) for v in x]
    alpha = exp_q16(new - old)
    total = floor_half_up(Fraction(s32(sum_word) * alpha, 65536)) + sum(w)
    return [v // 128 for v in w], [v % 128 for v in w], new % 2**32, total % 2**32, alpha


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=20), WORDS, WORDS, st.integers(-2**15, 2**15 - 1), st.integers(0, 47))
def test_smc_words_follow_the_document(scores, max_word, sum_word, m, s):
    assert smc_words(scores, max_word, sum_word, m, s) == document_smc([s32(a) for a in scores], max_word,
                                                                       sum_word, m, s)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(WORDS, WORDS), min_size=1, max_size=20), WORDS, WORDS,
       st.integers(-2**15, 2**15 - 1), st.integers(0, 47), st.integers(0, 30))
def test_a_wide_smc_follows_the_document(planes, max_word, sum_word, m, s, gap):
    """SMC with ws on the reference machine: each score is 128 x its high plane's word + its low plane's, ``ld``
    words on, modulo 2**32 (docs/ISA.md); the rest is SMC's, written here from the document."""
    n, ld = len(planes), len(planes) + gap
    ext = [0] * 512
    for t, (high, low) in enumerate(planes):
        ext[t], ext[ld + t] = high, low
    ext[300:302] = [max_word, sum_word]
    prog = [isa.ld(0, 0, 100), isa.ld(300, 300, 2), isa.smc(100, 0, n, m, s, 300, ld, ws=1),
            isa.st(100, 100, 210), isa.halt()]
    r = Machine(WIDE).run(prog, ext)
    assert r.ok, r.error
    dots = [s32((128 * s32(h) + s32(lo)) % 2**32) for h, lo in planes]
    high, low, new, total, alpha = document_smc(dots, max_word, sum_word, m, s)
    assert r.ext[100:100 + n] == high and r.ext[100 + ld:100 + ld + n] == low
    assert r.ext[300:303] == [new, total, alpha]


def test_wide_scores_need_their_chip():
    """ws exists on chips built with wide scores only (ILLEGAL elsewhere, as a stray bit is); its scores' range
    runs to the low plane's last word; the chip needs the online unit."""
    wide = isa.smc(100, 0, 9, 5, 3, 300, 20, ws=1)
    assert isa.decode(isa.encode(wide)) == (wide, Err.NONE)
    assert isa.check(wide, ONLINE) == Err.ILLEGAL and isa.check(wide, WIDE) == Err.NONE
    assert Machine(ONLINE).run([wide, isa.halt()]).error == Err.ILLEGAL
    assert "wide_scores=1" in isa.explain(wide, ONLINE)
    assert isa.footprints(wide)[0][0] == (0, 28)
    assert isa.check(isa.smc(100, 490, 9, 5, 3, 300, 20, ws=1), WIDE) == Err.SP_RANGE        # low plane past the end
    assert isa.check(isa.smc(100, 490, 9, 5, 3, 300, 20), WIDE) == Err.NONE
    with pytest.raises(ValueError, match="wide_scores"):
        Config(wide_scores=1)


@settings(max_examples=300, deadline=None)
@given(WORDS, WORDS, WORDS, WORDS)
def test_rsa_word_follows_the_document(partial, alpha_word, high, low):
    alpha = alpha_word % 2**17
    want = floor_half_up(Fraction(s32(partial) * alpha, 65536)) + 128 * s32(high) + s32(low)
    assert rsa_word(partial, alpha_word, high, low) == want % 2**32


@settings(max_examples=300, deadline=None)
@given(WORDS, st.one_of(WORDS, st.integers(1, 5000)), st.integers(-2**15, 2**15 - 1), st.integers(0, 31))
def test_nrm_word_follows_the_document(partial, sum_word, m, s):
    total = s32(sum_word)
    want = 0 if total < 1 else max(-128, min(127, floor_half_up(Fraction(s32(partial) * m, total * 2**s))))
    assert nrm_word(partial, sum_word, m, s) == want % 2**32


def test_online_opcodes_are_illegal_without_the_unit():
    for instr in (isa.smc(0, 0, 1, 1, 0, 10), isa.rsa(0, 0, 1, 0, 10), isa.nrm(0, 0, 1, 1, 0, 10)):
        assert isa.check(instr, Config()) == Err.ILLEGAL
        assert isa.check(instr, Config(online_unit=1)) == Err.NONE
        assert Machine(Config()).run([instr, isa.halt()]).error == Err.ILLEGAL
    assert isa.check(isa.smc(0, 0, 65, 1, 0, 10), ONLINE) == Err.SHAPE        # len > sm_max_len
    assert isa.check(isa.nrm(0, 0, 4, 1, 32, 10), ONLINE) == Err.SHAPE        # s > 31
    assert isa.check(isa.smc(0, 0, 4, 1, 47, 509), ONLINE) == Err.NONE
    assert isa.check(isa.smc(0, 0, 4, 1, 47, 100, 509), ONLINE) == Err.SP_RANGE    # the low digits past the end
    assert isa.check(isa.smc(0, 0, 4, 1, 47, 510), ONLINE) == Err.SP_RANGE    # the state's three words


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
def test_requests_are_all_reads_then_writes_one_per_cycle(mode):
    """The schedule the cycle model charges for and the decoupled MMs give way to: one access per cycle, every
    read before every write, the last write in the last busy cycle; a wide SMC reads both planes' words, one
    cycle more a score."""
    config = WIDE.replace(mode=mode)
    for instr in (isa.smc(0, 100, 7, 3, 4, 300, 11), isa.smc(0, 100, 7, 3, 4, 300, 11, ws=1),
                  isa.rsa(10, 100, 9, 20, 300), isa.nrm(0, 100, 5, 3, 4, 300)):
        reqs = online_requests(instr, config)
        cycles = [c for c, _, _ in reqs]
        assert len(set(cycles)) == len(cycles)
        assert max(c for c, _, k in reqs if k == "r") < min(c for c, _, k in reqs if k == "w")
        footprint = {a for lo, hi in isa.footprints(instr)[0] for a in range(lo, hi + 1)}
        assert {a for _, a, _ in reqs} <= footprint
        assert max(cycles) == isa.OPS[instr.op].busy(instr, config)
        if instr.ws:
            assert {a for _, a, k in reqs if k == "r"} >= set(range(100, 107)) | set(range(111, 118))
            assert isa.OPS[Op.SMC].busy(instr, config) == isa.OPS[Op.SMC].busy(replace(instr, ws=0), config) + 7


def head(L, d, seed, peaked=False, key_digits=1):
    """Random int8 q and V and keys of ``key_digits`` int8 digits (wide keys: -WIDE_KEY_MAX..WIDE_KEY_MAX)."""
    rng = np.random.default_rng(seed)
    q8 = rng.integers(-127, 128, d) if not peaked else rng.choice([-127, 127], d)
    k_max = KEY_LIMIT[key_digits]
    return q8, rng.integers(-k_max, k_max + 1, (L, d)), rng.integers(-127, 128, (L, d))


def run_head(config, L, d, chunk, seed, sim="model", peaked=False, key_digits=1):
    """One head's attention as a program (a group of one query head): (layout, program, image, expected)."""
    q8, K8, V8 = head(L, d, seed, peaked, key_digits)
    score = mantissa_shift(64 * 40 / (127 * KEY_LIMIT[key_digits] * math.sqrt(d)))     # logits over tens of units
    out = mantissa_shift(1.0)
    lay = GroupedLayout(config, (Group(L, (score,), (out,)),), d, chunk, key_digits)
    prog = grouped_program(lay)
    ext = grouped_ext_image(lay, [(q8[None], K8, V8)])
    want = list(online_attention(q8[None], K8[None], V8[None], [score[0]], [score[1]], [out[0]], [out[1]],
                                 chunk)[0])
    return lay, prog, ext, want


def output(lay, ext):
    return grouped_outputs(lay, ext)[0][0]


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
@pytest.mark.parametrize("L,d,chunk", [(1, 16, 64), (63, 16, 64), (64, 16, 64), (65, 16, 64), (200, 16, 64),
                                       (130, 8, 16), (300, 64, 64)])
def test_chunk_loop_program_is_online_attention(mode, L, d, chunk):
    config = Config(online_unit=1, mode=mode, sp_words=32768, ext_words=65536, imem_words=1024)
    for seed, peaked in ((L, False), (L + 1, True)):
        lay, prog, ext, want = run_head(config, L, d, chunk, seed, peaked=peaked)
        r = Machine(config).run(prog, ext)
        assert r.ok, r.error
        assert output(lay, r.ext) == want
        assert r.counters == cycle_counts(prog, config)[0]


@pytest.mark.parametrize("key_digits", [1, 2])
@pytest.mark.parametrize("L", [1, 70])
def test_a_packed_port_starts_the_state_below_every_score(key_digits, L):
    """A packed port loads bytes, and the state's starting maximum (SCORE_MIN) is not one: a head whose every
    score lies far below zero (tens of logits) must still get online_attention's outputs, not the zeros a start
    at 0 gives (every weight's distance from 0 past the exponential's table)."""
    config = Config(online_unit=1, mode="decoupled", bus_bytes=16, sp_banks=32, sp_words=32768, ext_words=65536,
                    imem_words=1024)
    rng = np.random.default_rng(L)
    q8 = rng.choice([-127, 127], 16)
    k_max = KEY_LIMIT[key_digits]
    K8 = -np.sign(q8) * rng.integers(k_max // 2, k_max + 1, (L, 16))        # every q.k strongly negative
    V8 = rng.integers(-127, 128, (L, 16))
    score = mantissa_shift(64 * 40 / (127 * k_max * math.sqrt(16)))
    out = mantissa_shift(1.0)
    lay = GroupedLayout(config, (Group(L, (score,), (out,)),), 16, 64, key_digits)
    prog = grouped_program(lay)
    r = Machine(config).run(prog, grouped_ext_image(lay, [(q8[None], K8, V8)]))
    want = list(online_attention(q8[None], K8[None], V8[None], [score[0]], [score[1]], [out[0]], [out[1]], 64)[0])
    assert r.ok and r.counters == cycle_counts(prog, config)[0]
    assert output(lay, r.ext) == want and any(want)


@pytest.mark.parametrize("wide", [0, 1])
@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
@pytest.mark.parametrize("L,d,chunk", [(1, 16, 64), (65, 16, 64), (130, 8, 16), (300, 64, 64)])
def test_wide_key_program_is_online_attention(mode, L, d, chunk, wide):
    """Wide keys (two digit planes, two score MMs added by RSA with alpha 0, or on a chip built with wide scores
    read by SMC's ws): the program's outputs are online_attention's on the 15-bit keys whole, which multiplies
    them without digits; and they are not what the high digits alone would give."""
    config = Config(online_unit=1, mode=mode, sp_words=32768, ext_words=65536, imem_words=1024, wide_scores=wide)
    for seed, peaked in ((L, False), (L + 1, True)):
        lay, prog, ext, want = run_head(config, L, d, chunk, seed, peaked=peaked, key_digits=2)
        r = Machine(config).run(prog, ext)
        assert r.ok, r.error
        assert output(lay, r.ext) == want and len(set(want)) > 1
        assert r.counters == cycle_counts(prog, config)[0]
        chunks = -(-L // chunk)
        assert sum(i.op == Op.RSA for i in prog) == (1 if wide else 2) * chunks
        assert [i.ws for i in prog if i.op == Op.SMC] == [wide] * chunks
        # the last chunk's scores as SMC takes them (RSA's sums, or 128 x the high plane + the low plane): q . k
        # exactly (numpy, on the whole keys), not q . 128 hi
        q8, K, _ = head(L, d, seed, peaked, 2)
        last = K[(L - 1) // chunk * chunk:]
        at, n = lay.score_row((L - 1) // chunk, 0), len(last)
        dots = [s32(w) for w in r.sp[at:at + n]]
        if wide:
            low = r.sp[at + lay.digit_stride:at + lay.digit_stride + n]
            dots = [128 * h + s32(w) for h, w in zip(dots, low)]
        assert dots == list(last @ q8) and dots != list((128 * ((last + 64) >> 7)) @ q8)


def test_wide_keys_refused_outside_their_range():
    with pytest.raises(ValueError, match="1 or 2 int8 digits"):
        GroupedLayout(ONLINE, (Group(4, ((1, 0),), ((1, 0),)),), 4, 4, key_digits=3)
    config = ONLINE.replace(mode="decoupled")
    lay = GroupedLayout(config, (Group(4, ((1, 0),), ((1, 0),)),), 4, 4, key_digits=2)
    zeros = np.zeros((4, 4), dtype=int)
    with pytest.raises(ValueError, match="wide key"):
        grouped_ext_image(lay, [(zeros[:1], np.full((4, 4), WIDE_KEY_MAX + 1), zeros)])


def test_a_long_context_step_is_bound_by_its_cache():
    """Decoupled, the chunk loop runs beside the cache's loads: L = 1,000, d = 64 within 1.05 x its words."""
    config = Config(online_unit=1, mode="decoupled", sp_words=32768, ext_words=262144, imem_words=1024, sp_banks=16)
    lay, prog, ext, want = run_head(config, 1000, 64, 64, 7)
    counters = cycle_counts(prog, config)[0]
    words = sum(i.len for i in prog if i.op in (Op.LD, Op.ST))
    assert words == 2 * 1000 * 64 + 64 + 2 + 64
    assert counters.cycles <= 1.05 * words, (counters.cycles, words)


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
@pytest.mark.parametrize("key_digits,chip", [(1, ONLINE), (2, ONLINE), (2, WIDE)])
def test_chunk_loop_on_pysim(mode, key_digits, chip):
    config = chip.replace(mode=mode)
    lay, prog, ext, want = run_head(config, 11, 4, 4, 3, key_digits=key_digits)
    (got,) = get_backend("pysim").run_many(config, [(prog, ext)])
    assert not compare_results(Machine(config).run(prog, ext), got)
    assert output(lay, got.ext) == want


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
def test_chunk_loop_on_verilator(mode):
    backend = get_backend("verilator")
    if backend.unavailable_reason():
        pytest.skip(backend.unavailable_reason())
    config = ONLINE.replace(mode=mode)
    jobs = [run_head(config, L, d, chunk, seed, key_digits=kd) for L, d, chunk, seed, kd in
            ((15, 8, 4, 1, 1), (9, 4, 8, 2, 1), (20, 4, 6, 3, 1), (13, 4, 4, 4, 2), (7, 8, 8, 5, 2))]
    results = backend.run_many(config, [(prog, ext) for _, prog, ext, _ in jobs])
    for (lay, prog, ext, want), got in zip(jobs, results):
        assert not compare_results(Machine(config).run(prog, ext), got)
        assert output(lay, got.ext) == want


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["decoupled", "inorder"])
def test_random_online_instructions_on_pysim(mode):
    """Single SMC, RSA and NRM on random words (pysim), each beside an MM on the decoupled chip; NRM also with a
    running sum of 0 and below (its outputs are 0 then)."""
    rng = random.Random(5)
    config = ONLINE.replace(mode=mode)
    jobs = []
    for op, total in ((isa.smc(100, 0, 9, rng.randrange(-2**15, 2**15), 12, 300, 20), 77),
                      (isa.rsa(200, 40, 7, 13, 303), 1), (isa.nrm(250, 200, 7, 20000, 14, 300), 700),
                      (isa.nrm(250, 200, 7, 20000, 14, 300), 0), (isa.nrm(250, 200, 7, 9, 0, 300), -3)):
        ext = [rng.getrandbits(32) if k < 400 else 0 for k in range(512)]
        ext[300:304] = [rng.randrange(-40000, 40000) % 2**32, total % 2**32, 0, rng.getrandbits(32)]
        jobs.append(([isa.ld(0, 0, 400), op, isa.mm(420, 0, 40, 4, 8, 4, 1, 8, 8, 4), isa.st(0, 0, 460),
                      isa.halt()], ext))
    results = get_backend("pysim").run_many(config, jobs)
    for (prog, ext), got in zip(jobs, results):
        assert not compare_results(Machine(config).run(prog, ext), got), prog[1]


@pytest.mark.parametrize("mode", ["decoupled", "inorder"])
def test_wide_smcs_on_pysim(mode):
    """SMC with ws on the RTL (pysim) against the reference machine, memory and counters: random planes beside an
    MM; an LD into the low plane issued right after the SMC (decoupled, the scoreboard must hold it until the
    SMC has read that plane); and an SMC whose low plane runs past the scratchpad (SP_RANGE)."""
    rng = random.Random(8)
    config = WIDE.replace(mode=mode)
    jobs = []
    for op, after in ((isa.smc(100, 0, 9, rng.randrange(-2**15, 2**15), 12, 300, 20, ws=1), []),
                      (isa.smc(100, 5, 16, -77, 20, 300, 16, ws=1), []),
                      (isa.smc(100, 3, 9, 913, 9, 300, 20, ws=1), [isa.ld(23, 410, 9)]),
                      (isa.smc(100, 490, 9, 5, 3, 300, 20, ws=1), [])):
        ext = [rng.getrandbits(32) if k < 420 else 0 for k in range(512)]
        ext[300:304] = [rng.randrange(-40000, 40000) % 2**32, 77, 0, rng.getrandbits(32)]
        jobs.append(([isa.ld(0, 0, 400), op, *after, isa.mm(420, 0, 40, 4, 8, 4, 1, 8, 8, 4), isa.st(0, 0, 460),
                      isa.halt()], ext))
    results = get_backend("pysim").run_many(config, jobs)
    for (prog, ext), got in zip(jobs, results):
        want = Machine(config).run(prog, ext)
        assert not compare_results(want, got), prog[1]
    assert Machine(config).run(*jobs[3]).error == Err.SP_RANGE


# -- decode steps over long contexts (ga2_sw.online_decode) ------------------------------------------------------

def online_step(config, lengths, seed=9, key_digits=1):
    from ga2_sw import decode, online_decode
    w = decode.make_workload(config, len(lengths), max(lengths), seed)
    P = decode.rq_params(w, key_digits)
    seqs = list(range(len(lengths)))
    return (w, P, decode.program(config, seqs, list(lengths), P, key_digits),
            online_decode.ext_image(w, P, seqs, list(lengths), key_digits))


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
@pytest.mark.parametrize("lengths", [(300, 17, 100, 1), (64, 65), (1,), (130, 130, 130, 130)])
def test_long_context_step_equals_the_reference(mode, lengths, d=16):
    """Each sequence's output equals a reference built from plain-Python projections and numpy online
    attention over caches from the same integer projections (online_decode.int_reference)."""
    from ga2_sw import online_decode
    config = Config(online_unit=1, mode=mode, max_ctx=300, sp_words=16384, ext_words=65536, imem_words=2048, d=d)
    w, P, prog, ext = online_step(config, lengths)
    r = Machine(config).run(prog, ext)
    assert r.ok, r.error
    for j, t in enumerate(lengths):
        assert online_decode.outputs(config, r.ext, j) == online_decode.int_reference(w, P, j, t), (j, t)
    # the layout's size holds every scratchpad word the step touches (sized_config sizes chips by it)
    sp_needed = online_decode.OnlineDecodeLayout(config).sp_needed
    assert max(hi for i in prog[:-1] for _, hi, _, _ in accesses(i)) < sp_needed
    assert r.counters == cycle_counts(prog, config)[0]


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
@pytest.mark.parametrize("lengths", [(300, 17, 100, 1), (64, 65), (1,)])
def test_wide_key_step_equals_the_reference(mode, lengths):
    """Wide keys (key_digits = 2): the step makes the new keys' two digits on the chip (RQ, K = 1 MMs, RSA) and
    attends over both planes; each output equals online attention over the 15-bit keys whole, computed from the
    projections' sums in plain Python (``128 hi + lo`` of ``online_decode.wide_key``), and differs from the int8
    keys' output somewhere."""
    from ga2_sw import decode, online_decode
    config = Config(online_unit=1, mode=mode, max_ctx=300, sp_words=16384, ext_words=65536, imem_words=2048)
    w = decode.make_workload(config, len(lengths), max(lengths), 9)
    P = decode.rq_params(w, 2)
    assert P["k"][0] == 1 and P["k"] != decode.rq_params(w)["k"]
    seqs = list(range(len(lengths)))
    prog = decode.program(config, seqs, list(lengths), P, key_digits=2)
    r = Machine(config).run(prog, online_decode.ext_image(w, P, seqs, list(lengths), 2))
    assert r.ok, r.error
    assert r.counters == cycle_counts(prog, config)[0]
    got = [online_decode.outputs(config, r.ext, j, 2) for j in seqs]
    assert got == [online_decode.int_reference(w, P, j, t, 2) for j, t in enumerate(lengths)]
    int8 = decode.rq_params(w)
    assert got != [online_decode.int_reference(w, int8, j, t) for j, t in enumerate(lengths)] or lengths == (1,)
    # the new rows' digits in the cache: 128 hi + lo is the rounded sum, each digit an int8
    lay = online_decode.OnlineDecodeLayout(config, 2)
    hi = [s8(v) for v in r.ext[lay.ex_k(0, 0) + (lengths[0] - 1) * lay.key_stride:][:config.d]]
    lo = [s8(v) for v in r.ext[lay.ex_k(0, 1) + (lengths[0] - 1) * lay.key_stride:][:config.d]]
    assert max(map(abs, lo)) <= 64 and any(hi)


def test_wide_key_digits_of_a_sum():
    """``wide_key``: hi the int8 requantisation of acc / 2**(s + 7), and 128 hi + lo = acc / 2**s rounded half up,
    written here with Python's fractions."""
    from fractions import Fraction
    from math import floor
    from ga2_sw.online_decode import wide_key
    for s in (0, 1, 5, 16):
        for acc in list(range(-3000, 3000, 7)) + [2 ** 20 + 1, -(2 ** 20) - 1, 127 << (s + 7), -128 << (s + 7)]:
            hi, lo = wide_key(acc, s)
            assert 128 * hi + lo == floor(Fraction(acc, 2 ** s) + Fraction(1, 2)), (acc, s)
            assert -128 <= hi <= 127


@pytest.mark.parametrize("lengths", [(70, 3), (64, 65, 1)])
def test_keys_spread_over_the_banks_are_still_the_reference(lengths):
    """d = 32 on 8 banks: decoupled, the keys are 34 words apart (``key_stride``), in the chunk buffers and in
    the external cache, and the outputs are still the reference's."""
    from ga2_sw.online_decode import OnlineDecodeLayout
    config = Config(online_unit=1, mode="decoupled", max_ctx=300, sp_words=16384, ext_words=65536, imem_words=2048,
                    d=32)
    assert OnlineDecodeLayout(config).key_stride == 34
    test_long_context_step_equals_the_reference("decoupled", lengths, d=32)


def test_key_stride_puts_a_score_slice_on_distinct_banks():
    """d = 64: on 16 banks the keys stay 64 words apart (the README's figures); on 8 banks, where every key 64
    words apart sits on one bank (word a is on bank (a + a // 8) % 8, docs/ARCHITECTURE.md), 65, and each
    slice of every score MM of a step reads its four keys on four banks."""
    from ga2_sw.online_decode import OnlineDecodeLayout
    for banks, stride in ((16, 64), (8, 65)):
        config = Config(online_unit=1, mode="decoupled", d=64, d_model=256, max_ctx=256, sp_banks=banks,
                        sp_words=32768, ext_words=1 << 20, imem_words=4096)
        assert OnlineDecodeLayout(config).key_stride == stride
        _, _, prog, _ = online_step(config, (200, 3, 64, 130))
        scores = [i for i in prog if i.op == Op.MM and i.M == 1]
        assert scores and all(i.ldb == stride for i in scores)
        for i in scores:
            for k in range(i.K):
                keys = [i.B + c * i.ldb + k for c in range(i.N)]
                assert len({(a + a // banks) % banks for a in keys}) == len(keys), (i, k)


# Both modes, int8 and wide keys, d = 3 (keys 4 words apart) in the default tier; the slow tier adds d = 4
# decoupled and wide keys in order.
@pytest.mark.parametrize("mode, d, key_digits", [
    ("inorder", 4, 1), pytest.param("decoupled", 4, 1, marks=pytest.mark.slow), ("decoupled", 3, 1),
    pytest.param("inorder", 4, 2, marks=pytest.mark.slow), ("decoupled", 3, 2)])
def test_long_context_steps_on_the_simulators(mode, d, key_digits):
    """A ragged step on pysim and Verilator: the machine's memories and counters; with d = 3 the decoupled
    step's keys are 4 words apart (``key_stride``)."""
    from ga2_sw.online_decode import OnlineDecodeLayout
    config = Config(online_unit=1, mode=mode, rows=2, cols=2, d=d, d_model=6, max_ctx=40 // key_digits + 10,
                    sp_words=2048, ext_words=1024, imem_words=128, sp_banks=4)
    assert OnlineDecodeLayout(config).key_stride == {4: 4, 3: 4}[d]
    _, _, prog, ext = online_step(config, (23, 5), key_digits=key_digits)
    want = Machine(config).run(prog, ext)
    for sim in ("pysim", "verilator"):
        backend = get_backend(sim)
        if backend.unavailable_reason():
            continue
        (got,) = backend.run_many(config, [(prog, ext)])
        assert not compare_results(want, got), (mode, sim)


@pytest.mark.parametrize("lengths", [(1024, 1024, 1024, 1024), (1024, 17, 1000, 1)])
def test_wide_key_step_is_bound_by_its_caches(lengths):
    """Wide keys on the decoupled 4x4 (8 banks, d = 64, d_model = 256): the K cache's words double, and the step
    stays within 1.05 x the words it moves (the next chunk's loads between this chunk's parts)."""
    config = Config(online_unit=1, mode="decoupled", d=64, d_model=256, max_ctx=1024, sp_words=32768,
                    ext_words=1 << 20, imem_words=8192)
    _, _, prog, _ = online_step(config, lengths, key_digits=2)
    counters, err, _ = cycle_counts(prog, config)
    words = sum(i.len for i in prog if i.op in (Op.LD, Op.ST))
    tensors = 4 * 256 + 3 * 256 * 64 + sum(3 * 64 * (L - 1) + 3 * 64 + 64 for L in lengths) + 3
    assert err == Err.NONE
    assert tensors <= words <= 1.015 * tensors, (words, tensors)     # a word in 65 of two thirds: key_stride
    assert counters.cycles <= 1.05 * words, (counters.cycles, words)


@pytest.mark.parametrize("banks", [8, 16])
@pytest.mark.parametrize("lengths", [(1024, 1024, 1024, 1024), (1024, 17, 1000, 1)])
def test_long_context_step_is_bound_by_its_caches(lengths, banks):
    """Decoupled 4x4 on 8 or 16 banks, d = 64, d_model = 256: within 1.05 x the words the step moves, and
    those within 1% of the words of the step's tensors (the words between keys on 8 banks, ``key_stride``; issue
    16 asks 1.15 x at 4,096 tokens; `ga2 decode-table ... --max-ctx 4096` measures that, docs/LONG_CONTEXT.md)."""
    config = Config(online_unit=1, mode="decoupled", d=64, d_model=256, max_ctx=1024, sp_banks=banks,
                    sp_words=32768, ext_words=1 << 20, imem_words=4096)
    _, _, prog, _ = online_step(config, lengths)
    counters, err, _ = cycle_counts(prog, config)
    words = sum(i.len for i in prog if i.op in (Op.LD, Op.ST))
    # x and the three weight matrices, each sequence's caches (K and V, the new rows stored) and its output
    tensors = 4 * 256 + 3 * 256 * 64 + sum(2 * 64 * (L - 1) + 2 * 64 + 64 for L in lengths)
    assert err == Err.NONE
    assert tensors <= words <= 1.01 * tensors, (words, tensors)
    assert counters.cycles <= 1.05 * words, (counters.cycles, words)


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
@pytest.mark.parametrize("fine", [False, True])
def test_grouped_query_program_is_online_attention_per_head(mode, fine):
    """Several key/value heads of several sequences in one program, each streamed once for the query heads that
    share it (ga2_sw.online_program.grouped_program): every query head's output is online_attention's; with
    fine readings (a second NRM per head at eight times the multiplier, in two of the three groups) those are
    the same running outputs normalised at their own scaling."""
    rng = np.random.default_rng(4)
    config = Config(online_unit=1, mode=mode, sp_words=8192, ext_words=16384, imem_words=1024, sp_banks=16)
    groups, data = [], []
    for g, (L, heads) in enumerate(((70, 3), (9, 1), (33, 2))):
        scores = tuple(mantissa_shift(float(rng.uniform(0.2, 4)) * 64 / 127 / 127 / 4) for _ in range(heads))
        ratios = [float(rng.uniform(0.5, 2)) for _ in range(heads)]
        outs = tuple(mantissa_shift(r) for r in ratios)
        fines = tuple(mantissa_shift(8 * r) for r in ratios) if fine and g != 1 else ()
        groups.append(Group(L, scores, outs, fines))
        data.append((rng.integers(-127, 128, (heads, 16)), rng.integers(-127, 128, (L, 16)),
                     rng.integers(-127, 128, (L, 16))))
    lay = GroupedLayout(config, tuple(groups), 16, 32)
    prog = grouped_program(lay)
    ext = grouped_ext_image(lay, data)
    r = Machine(config).run(prog, ext)
    assert r.ok and r.counters == cycle_counts(prog, config)[0]
    got, got_fine = grouped_outputs(lay, r.ext), grouped_outputs(lay, r.ext, fine=True)
    for g, ((q8, K8, V8), grp) in enumerate(zip(data, groups)):
        heads = len(q8)
        K, V = np.broadcast_to(K8, (heads,) + K8.shape), np.broadcast_to(V8, (heads,) + V8.shape)
        sm, ss = [s[0] for s in grp.scores], [s[1] for s in grp.scores]
        want = online_attention(q8, K, V, sm, ss, [o[0] for o in grp.outs], [o[1] for o in grp.outs], 32)
        assert got[g] == [list(map(int, row)) for row in want], g
        if grp.fines:
            want = online_attention(q8, K, V, sm, ss, [o[0] for o in grp.fines], [o[1] for o in grp.fines], 32)
            assert got_fine[g] == [list(map(int, row)) for row in want], g
            assert got_fine[g] != got[g]
        else:
            assert got_fine[g] == []
    assert sum(i.op == Op.NRM for i in prog) == sum(len(g.scores) + len(g.fines) for g in groups)


def _heads_of_64(seed, shapes, key_digits):
    """Groups of ``(context, query heads)`` with d = 64 and random scalings, and their random (q8, K, V8): keys
    of ``key_digits`` int8 digits."""
    rng = np.random.default_rng(seed)
    groups, data = [], []
    for L, heads in shapes:
        scores = tuple(mantissa_shift(float(rng.uniform(0.2, 4)) * 64 / 127 / KEY_LIMIT[key_digits] / 8)
                       for _ in range(heads))
        groups.append(Group(L, scores, tuple(mantissa_shift(float(rng.uniform(0.5, 2))) for _ in range(heads))))
        k_max = KEY_LIMIT[key_digits]
        data.append((rng.integers(-127, 128, (heads, 64)), rng.integers(-k_max, k_max + 1, (L, 64)),
                     rng.integers(-127, 128, (L, 64))))
    return tuple(groups), data


def _outputs_are_online_attention(lay, prog, image, data):
    """``prog`` on the reference machine from ``image``: the cycle model's counters, and each query head's
    output online_attention's."""
    r = Machine(lay.config).run(prog, image)
    assert r.ok and r.counters == cycle_counts(prog, lay.config)[0]
    for g, ((q8, K8, V8), grp) in enumerate(zip(data, lay.groups)):
        heads = len(q8)
        K, V = np.broadcast_to(K8, (heads,) + K8.shape), np.broadcast_to(V8, (heads,) + V8.shape)
        want = online_attention(q8, K, V, [s[0] for s in grp.scores], [s[1] for s in grp.scores],
                                [o[0] for o in grp.outs], [o[1] for o in grp.outs], lay.chunk)
        assert grouped_outputs(lay, r.ext)[g] == [list(map(int, row)) for row in want], g


@pytest.mark.parametrize("key_digits", [1, 2])
def test_grouped_program_spreads_its_keys_over_eight_banks(key_digits):
    """d = 64 on 8 banks, decoupled: ``ga2 llm``'s grouped programs keep their keys 65 words apart (64 would put
    every slice of a score MM on one bank), in the chunk buffers and in the external cache; every slice of every
    score MM reads its keys on distinct banks, and each query head's output is still online_attention's."""
    config = Config(online_unit=1, mode="decoupled", sp_words=16384, ext_words=65536, imem_words=1024, sp_banks=8,
                    d=64)
    groups, data = _heads_of_64(11, ((40, 3), (7, 2)), key_digits)
    lay = GroupedLayout(config, groups, 64, 16, key_digits)
    assert lay.key_stride == 65
    prog = grouped_program(lay)
    scores = [i for i in prog if i.op == Op.MM and i.tb == 1]
    assert scores and all(i.ldb == 65 for i in scores)
    for i in scores:
        for k in range(i.K):
            keys = [i.B + c * i.ldb + k for c in range(i.N)]
            assert len({(a + a // 8) % 8 for a in keys}) == len(keys), (i, k)
    _outputs_are_online_attention(lay, prog, grouped_ext_image(lay, data), data)


@pytest.mark.parametrize("key_digits,wide", [(1, 0), pytest.param(2, 0, marks=pytest.mark.slow), (2, 1)])
def test_grouped_program_reads_value_columns_on_thirty_two_banks(key_digits, wide):
    """d = 64 and chunks of 64 on the llm chip's 32 banks: the V chunks are held a column of 64 tokens per value
    dimension (``value_columns``), in external memory (a sequence's last chunk padded) as in the buffers, so
    every P V MM reads them transposed, and every slice of every MM reads its operands on distinct banks (the
    bank function worked here: ``(a + a // 32) % 32``); each query head's output is still online_attention's,
    over a context of a chunk and a part of the next and one shorter than a chunk."""
    config = Config(online_unit=1, mode="decoupled", sp_words=32768, ext_words=131072, imem_words=1024,
                    sp_banks=32, cols=16, d=64, wide_scores=wide)
    groups, data = _heads_of_64(12, ((80, 3), (9, 1)), key_digits)
    lay = GroupedLayout(config, groups, 64, 64, key_digits)
    assert lay.value_columns
    prog = grouped_program(lay)
    products = [i for i in prog if i.op == Op.MM and i.M == 2]
    assert products and all(i.tb == 1 and i.ldb == 64 for i in products)
    for i in (i for i in prog if i.op == Op.MM and i.K > 3):
        for k in range(i.K):
            rows = [i.A + r * i.lda + k for r in range(i.M)]
            cols = [i.B + (c * i.ldb + k if i.tb else k * i.ldb + c) for c in range(i.N)]
            assert len({(a + a // 32) % 32 for a in rows + cols}) == i.M + i.N, (i, k)
    image = grouped_ext_image(lay, data)
    assert image[lay.ex_v(0) + 64 * 64 + 5 * 64 + 13] == int(data[0][2][64 + 13][5]) & 0xFFFFFFFF
    _outputs_are_online_attention(lay, prog, image, data)


# -- two streams (GroupedLayout.streams): P V of a group's heads as one MM, two groups' chunks in turn ------------

LLM_ARRAY = Config(online_unit=1, mode="decoupled", sp_words=65536, ext_words=262144, imem_words=4096, sp_banks=32,
                   rows=8, cols=16, d=64)


def _pv_rows(prog, lay):
    """The M of every P V MM of a grouped program (its A rows are SMC's digit rows, ``digit_stride`` apart)."""
    return sorted({i.M for i in prog if i.op == Op.MM and i.lda == lay.digit_stride and i.K <= lay.chunk})


@pytest.mark.parametrize("key_digits,wide", [(1, 0), (2, 0), (2, 1)])
def test_two_streams_are_online_attention(key_digits, wide):
    """On the llm chip's array and banks (8 x 16, 32 banks), groups of one to three query heads in two streams,
    each stream with buffers of its own: every query head's output is still online_attention's and the counters
    the cycle model's; P V is one MM of every head's two digit rows, and the program takes fewer cycles than the
    same groups in one stream."""
    config = LLM_ARRAY.replace(wide_scores=wide)
    groups, data = _heads_of_64(13, ((80, 3), (9, 1), (130, 3), (64, 2)), key_digits)
    lay = GroupedLayout(config, groups, 64, 64, key_digits, streams=2)
    prog = grouped_program(lay)
    _outputs_are_online_attention(lay, prog, grouped_ext_image(lay, data), data)
    assert _pv_rows(prog, lay) == [2, 4, 6]
    one = GroupedLayout(config, groups, 64, 64, key_digits)
    assert _pv_rows(grouped_program(one), one) == [2]
    # on the llm chip itself (its 16-byte port to a DDR3), scheduled as whole_step schedules a step's programs
    llm = chip("llm").config.replace(wide_scores=wide)
    cycles = [cycle_counts(reorder(grouped_program(GroupedLayout(llm, groups, 64, 64, key_digits, streams=n)), llm,
                                   SCHEDULE, window=SCHEDULE_WINDOW), llm)[0].cycles for n in (1, 2)]
    assert cycles[1] < cycles[0], cycles


def test_the_layout_takes_two_streams_where_the_chip_allows():
    """``grouped_layout``: two streams for two groups or more where one MM holds a group's digit rows (8 rows, three
    heads) and the scratchpad has the room; one for a single group, for three heads on 4 rows (the long chip),
    and where the scratchpad holds one stream's buffers alone. Asked for, two streams without the rows, or three
    streams, are refused."""
    three = (Group(70, ((1, 0),) * 3, ((1, 0),) * 3),) * 2
    assert grouped_layout(LLM_ARRAY, three, 64, 64, 2).streams == 2
    assert grouped_layout(LLM_ARRAY, three[:1], 64, 64, 2).streams == 1
    assert grouped_layout(LLM_ARRAY.replace(rows=4), three, 64, 64, 2).streams == 1
    one = GroupedLayout(LLM_ARRAY, three, 64, 64, 2)
    assert grouped_layout(LLM_ARRAY.replace(sp_words=-(-one.sp_needed // 1024) * 1024), three, 64, 64, 2).streams == 1
    with pytest.raises(LayoutError, match="two streams need"):
        GroupedLayout(LLM_ARRAY.replace(rows=4), three, 64, 64, 2, streams=2)
    with pytest.raises(LayoutError, match="1 or 2 streams"):
        GroupedLayout(LLM_ARRAY, three, 64, 64, 2, streams=3)


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
def test_two_streams_on_pysim(mode):
    """Two streams on the RTL (pysim, a 4 x 4 array: groups of two heads and one), memory and counters against the
    reference machine, each head's output online_attention's."""
    config = ONLINE.replace(mode=mode, sp_words=1024, ext_words=1024, imem_words=256)
    rng = np.random.default_rng(6)
    groups, data = [], []
    for L, heads in ((9, 2), (13, 2), (5, 1)):
        groups.append(Group(L, tuple(mantissa_shift(float(rng.uniform(0.5, 3)) * 64 / 127 / 127 / 2)
                                     for _ in range(heads)),
                            tuple(mantissa_shift(float(rng.uniform(0.5, 2))) for _ in range(heads))))
        data.append((rng.integers(-127, 128, (heads, 4)), rng.integers(-127, 128, (L, 4)),
                     rng.integers(-127, 128, (L, 4))))
    lay = GroupedLayout(config, tuple(groups), 4, 4, streams=2)
    prog = grouped_program(lay)
    ext = grouped_ext_image(lay, data)
    (got,) = get_backend("pysim").run_many(config, [(prog, ext)])
    assert not compare_results(Machine(config).run(prog, ext), got)
    _outputs_are_online_attention(lay, prog, ext, data)
