"""The reference machine against numpy and plain-Python models, its error behaviour, and the cycle model."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ga2_sw import isa
from ga2_sw.config import Config
from ga2_sw.cycles import Counters, cycle_counts
from ga2_sw.isa import Op, Err
from ga2_sw.machine import Machine
from ga2_sw.numerics import requant, softmax_q16

CFG = Config(rows=4, cols=4, sp_words=256, ext_words=256, imem_words=64, sm_max_len=32)
seeds = st.integers(0, (1 << 32) - 1)


def memory(seed, n=256):
    """n random 32-bit words (hypothesis draws the seed: much cheaper than drawing 256 integers)."""
    return [int(v) for v in np.random.default_rng(seed).integers(0, 1 << 32, n)]


def int8_view(words):
    """The int8 operands carried by 32-bit words: their low bytes, as numpy int8."""
    return np.asarray(words, dtype=np.uint64).astype(np.uint8).view(np.int8).astype(np.int64)


def run(program, sp=None, ext=None, config=CFG):
    return Machine(config).run(list(program) + [isa.halt()], ext=ext, sp=sp)


# -- MM ------------------------------------------------------------------------------------------------

@st.composite
def mm_case(draw):
    M, K, N = draw(st.integers(1, CFG.rows)), draw(st.integers(1, 12)), draw(st.integers(1, CFG.cols))
    tb = draw(st.integers(0, 1))
    lda, ldb = draw(st.integers(0, 14)), draw(st.integers(0, 14))
    ldc = draw(st.integers(N, 8))                  # rows of the result do not overlap each other
    A = draw(st.integers(0, 255 - ((M - 1) * lda + K - 1)))
    B = draw(st.integers(0, 255 - ((N - 1) * ldb + K - 1 if tb else (K - 1) * ldb + N - 1)))
    dst = draw(st.integers(0, 255 - ((M - 1) * ldc + N - 1)))
    sp = memory(draw(seeds))
    return isa.mm(dst=dst, A=A, B=B, M=M, K=K, N=N, tb=tb, lda=lda, ldb=ldb, ldc=ldc), sp


@settings(max_examples=300, deadline=None)
@given(mm_case())
def test_mm_against_numpy(case):
    i, sp = case
    mem = int8_view(sp)
    a = np.array([[mem[i.A + r * i.lda + k] for k in range(i.K)] for r in range(i.M)])
    if i.tb:
        b = np.array([[mem[i.B + c * i.ldb + k] for c in range(i.N)] for k in range(i.K)])
    else:
        b = np.array([[mem[i.B + k * i.ldb + c] for c in range(i.N)] for k in range(i.K)])
    c = a @ b
    expected = np.array(sp, dtype=np.int64)
    for r in range(i.M):                           # all operands read before any write (may overlap dst)
        expected[i.dst + r * i.ldc:i.dst + r * i.ldc + i.N] = c[r] & 0xFFFFFFFF
    res = run([i], sp=sp)
    assert res.ok
    assert res.sp == expected.tolist()


def test_mm_extremes():
    sp = [0] * 256
    sp[0:4] = [0x80] * 4                           # -128 (upper bits ignored: 0x80 is the low byte)
    sp[4:8] = [0xFFFFFF80] * 4
    res = run([isa.mm(dst=100, A=0, B=4, M=1, K=4, N=1, tb=1, ldb=0)], sp=sp)
    assert res.sp[100] == 4 * 16384


# -- LD / ST -------------------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(st.integers(1, 64), st.data())
def test_ld_st_move_words(n, data):
    dst, src = data.draw(st.integers(0, 256 - n)), data.draw(st.integers(0, 256 - n))
    ext = memory(data.draw(seeds))
    res = run([isa.ld(dst=dst, src=src, len=n)], ext=ext)
    assert res.sp[dst:dst + n] == ext[src:src + n] and sum(res.sp[:dst] + res.sp[dst + n:]) == 0
    back = data.draw(st.integers(0, 256 - n))
    res2 = run([isa.ld(dst=dst, src=src, len=n), isa.st(src=dst, dst=back, len=n)], ext=ext)
    expected = list(ext)
    expected[back:back + n] = ext[src:src + n]
    assert res2.ext == expected


# -- RQ ------------------------------------------------------------------------------------------------

def rq_pipeline(sp, i, depth):
    """A requantiser ``depth`` cycles deep (pipeline stages and the scratchpad's write register), cycle by
    cycle: each cycle writes what leaves the last stage, then reads the next element (so a read in the same
    cycle as a write to that word sees the old value), then shifts."""
    sp = list(sp)
    stages = [None] * depth
    for cycle in range(i.len + depth):
        fetched = sp[i.src + cycle] if cycle < i.len else None
        leaving = stages[-1]
        if leaving is not None:
            index, word = leaving
            a = word - (1 << 32) if word >> 31 else word
            sp[i.dst + index] = requant(a, i.m, i.s) & 0xFFFFFFFF
        stages = [(cycle, fetched) if fetched is not None else None] + stages[:-1]
    return sp


def rq_read_first(sp, i):
    sp = list(sp)
    values = [sp[i.src + t] for t in range(i.len)]
    for t, w in enumerate(values):
        sp[i.dst + t] = requant(w - (1 << 32) if w >> 31 else w, i.m, i.s) & 0xFFFFFFFF
    return sp


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(-48, 48), st.integers(-(1 << 15), (1 << 15) - 1), st.integers(0, 47), seeds)
def test_rq_reads_first_or_faults_on_a_partial_overlap(n, offset, m, s, seed):
    src = 100
    i = isa.rq(dst=src + offset, src=src, len=n, m=m, s=s)
    sp = memory(seed)
    res = run([i], sp=sp)
    if 0 < abs(offset) < n:
        assert (res.error, res.sp) == (Err.OVERLAP, sp)
    else:
        assert (res.error, res.sp) == (Err.NONE, rq_read_first(sp, i))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 40), st.integers(-48, 48), st.integers(1, 12), seeds)
def test_a_legal_rq_computes_the_same_at_every_pipeline_depth(n, offset, depth, seed):
    """Why the ISA faults a partial overlap and allows the rest: on the legal ones (in place or disjoint),
    what a pipeline of any depth computes is what reading everything first computes, so the two modes'
    requantisers may differ in depth; on a partial overlap a deep enough pipeline reads its own results."""
    src = 100
    i = isa.rq(dst=src + offset, src=src, len=n, m=3, s=1)
    sp = memory(seed)
    if not 0 < abs(offset) < n:
        assert rq_pipeline(sp, i, depth) == rq_read_first(sp, i)


def test_a_partial_overlap_depends_on_the_pipeline_depth():
    # dst = src + 7: element t lands on word src + t + 7 in step t + 6 of a 6-deep pipeline, and that word is
    # read as element t + 7 in step t + 7, so from element 7 on RQ would requantise its own results; a 7-deep
    # pipeline would not. This is the case the OVERLAP fault keeps out of the ISA.
    src, n = 10, 12
    sp = [0] * 256
    sp[src:src + n + 7] = [(v * 7 - 40) & 0xFFFFFFFF for v in range(n + 7)]
    i = isa.rq(dst=src + 7, src=src, len=n, m=3, s=1)
    assert rq_pipeline(sp, i, 6) != rq_pipeline(sp, i, 7)
    assert rq_pipeline(sp, i, 7) == rq_read_first(sp, i)
    assert run([i], sp=sp).error == Err.OVERLAP


# -- SM ------------------------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(st.integers(1, 32), st.integers(-40, 40), seeds)
def test_sm_against_softmax_of_the_low_bytes(n, offset, seed):
    src, sp = 100, memory(seed)
    scores = [int(v) for v in int8_view(sp[src:src + n])]
    expected = list(sp)
    expected[src + offset:src + offset + n] = softmax_q16(scores)
    assert run([isa.sm(dst=src + offset, src=src, len=n)], sp=sp).sp == expected


# -- errors --------------------------------------------------------------------------------------------

FAULTS = [
    (isa.ld(dst=250, src=0, len=10), Err.SP_RANGE),
    (isa.ld(dst=0, src=250, len=10), Err.EXT_RANGE),
    (isa.st(src=0, dst=250, len=10), Err.EXT_RANGE),
    (isa.mm(dst=0, A=0, B=0, M=5, K=1, N=1), Err.SHAPE),
    (isa.mm(dst=251, A=0, B=0, M=2, K=1, N=2, ldc=4), Err.SP_RANGE),      # last word 256
    (isa.rq(dst=0, src=0, len=4, m=1, s=48), Err.SHAPE),
    (isa.rq(dst=1, src=0, len=4, m=1, s=0), Err.OVERLAP),
    (isa.rq(dst=0, src=3, len=4, m=1, s=0), Err.OVERLAP),
    (isa.sm(dst=0, src=0, len=33), Err.SHAPE),
    (isa.ld(dst=0, src=0, len=0), Err.SHAPE),
    (1 << 127 | 6, Err.ILLEGAL),
    (9, Err.ILLEGAL),
]


@pytest.mark.parametrize("bad, err", FAULTS)
def test_a_faulting_instruction_writes_nothing(bad, err):
    ext = memory(3)
    before = [isa.ld(dst=0, src=0, len=200), isa.mm(dst=200, A=0, B=16, M=4, K=4, N=4, ldc=4),
              isa.rq(dst=220, src=200, len=16, m=3, s=2), isa.st(src=200, dst=100, len=40)]
    after = [isa.st(src=0, dst=0, len=256), isa.ld(dst=0, src=0, len=256), isa.halt()]
    program = before + [bad] + after
    m = Machine(CFG)
    res = m.run(program, ext=ext)
    ref = m.run(before + [isa.halt()], ext=ext)
    assert (res.error, res.pc) == (err, len(before))
    assert res.sp == ref.sp and res.ext == ref.ext
    # counters: those of `before`, the faulting instruction's two issue cycles, not counted as executed
    assert res.counters == Counters(ref.counters.cycles, ref.counters.mm, ref.counters.dma, ref.counters.vec,
                                    ref.counters.instructions - 1)
    assert cycle_counts(program, CFG) == (res.counters, err, len(before))


def test_counters_by_hand():
    # 1 fetch; LD: 2 + (8 + 4); MM 2x3x2: 2 + (3+1)*(2+2) + 4; RQ: 2 + (5 + 5); SM: 2 + (3*4 + 21); HALT: 2
    program = [isa.ld(0, 0, 8), isa.mm(16, 0, 0, M=2, K=3, N=2, lda=3, ldb=2, ldc=2), isa.rq(32, 0, 5, 1, 0),
               isa.sm(40, 0, 4), isa.halt()]
    res = Machine(CFG).run(program)
    assert res.ok and res.pc == 4
    assert res.counters == Counters(cycles=1 + 14 + 22 + 12 + 35 + 2, mm=20, dma=12, vec=10 + 33, instructions=5)
    st_only = Machine(CFG).run([isa.st(0, 0, 8), isa.halt()])
    assert st_only.counters == Counters(1 + 2 + 9 + 2, 0, 9, 0, 2)


def test_pc_overflow_and_empty_instruction_memory():
    cfg = Config(imem_words=4)
    program = [isa.ld(0, 0, 1)] * 4                # fills the instruction memory, no HALT
    res = Machine(cfg).run(program)
    assert (res.error, res.pc) == (Err.PC_OVERFLOW, 4)
    assert res.counters == Counters(1 + 4 * (2 + 5) + 2, 0, 20, 0, 4)
    assert cycle_counts(program, cfg) == (res.counters, Err.PC_OVERFLOW, 4)
    short = [isa.ld(0, 0, 1)] * 2                  # the rest of the memory is zero: opcode 0 is illegal
    res = Machine(cfg).run(short)
    assert (res.error, res.pc) == (Err.ILLEGAL, 2)
    assert cycle_counts(short, cfg) == (res.counters, Err.ILLEGAL, 2)
    with pytest.raises(ValueError, match="instruction memory holds 4"):
        Machine(cfg).run([isa.halt()] * 5)


def test_run_does_not_mutate_its_inputs():
    ext, sp = [1] * 256, [2] * 256
    Machine(CFG).run([isa.ld(0, 0, 10), isa.st(0, 20, 10), isa.halt()], ext=ext, sp=sp)
    assert ext == [1] * 256 and sp == [2] * 256


# -- the cycle model -----------------------------------------------------------------------------------

@st.composite
def valid_instr(draw):
    op = draw(st.sampled_from([Op.LD, Op.ST, Op.MM, Op.RQ, Op.SM]))
    if op in (Op.LD, Op.ST):
        n = draw(st.integers(1, 40))
        a, b = draw(st.integers(0, 256 - n)), draw(st.integers(0, 256 - n))
        return isa.ld(a, b, n) if op == Op.LD else isa.st(a, b, n)
    if op == Op.MM:
        M, K, N = draw(st.integers(1, 4)), draw(st.integers(1, 16)), draw(st.integers(1, 4))
        lda, ldb, ldc = draw(st.integers(0, 16)), draw(st.integers(0, 16)), draw(st.integers(0, 16))
        tb = draw(st.integers(0, 1))
        A = draw(st.integers(0, 255 - ((M - 1) * lda + K - 1)))
        B = draw(st.integers(0, 255 - ((N - 1) * ldb + K - 1 if tb else (K - 1) * ldb + N - 1)))
        dst = draw(st.integers(0, 255 - ((M - 1) * ldc + N - 1)))
        return isa.mm(dst, A, B, M, K, N, tb, lda, ldb, ldc)
    n = draw(st.integers(1, 32))
    a, b = draw(st.integers(0, 256 - n)), draw(st.integers(0, 256 - n))
    if op == Op.RQ:
        if 0 < abs(a - b) < n:               # a partial overlap faults (OVERLAP): in place instead
            a = b
        return isa.rq(a, b, n, draw(st.integers(-(1 << 15), (1 << 15) - 1)), draw(st.integers(0, 47)))
    return isa.sm(a, b, n)


@settings(max_examples=150, deadline=None)
@given(st.lists(valid_instr(), max_size=12), seeds)
def test_cycle_model_matches_the_machine_on_valid_programs(body, seed):
    program, ext = body + [isa.halt()], memory(seed)
    res = Machine(CFG).run(program, ext=ext)
    assert res.ok and res.pc == len(body)
    assert cycle_counts(program, CFG) == (res.counters, Err.NONE, len(body))
    assert res.counters.instructions == len(program)
    assert res.counters.cycles == 1 + 2 * len(program) + res.counters.mm + res.counters.dma + res.counters.vec


def _field(op, name):
    # shapes near their limits (so SHAPE faults are common), everything else over the whole range
    return st.integers(0, 63 if name == "s" else 70) if name in ("M", "N", "K", "len", "s") else st.integers(*isa.field_range(op, name))


any_instr = st.sampled_from(list(Op)).flatmap(
    lambda op: st.fixed_dictionaries({name: _field(op, name) for name, _ in isa.FIELDS[op]})
    .map(lambda f: isa.Instr(op, **f)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(valid_instr(), any_instr, st.integers(0, (1 << 128) - 1)), max_size=10))
def test_cycle_model_matches_the_machine_on_any_program(program):
    cfg = Config(rows=4, cols=4, sp_words=256, ext_words=256, imem_words=8, sm_max_len=32)
    program = program[:8]
    res = Machine(cfg).run(program)
    counters, err, pc = cycle_counts(program, cfg)
    assert (counters, err, pc) == (res.counters, res.error, res.pc)


@pytest.mark.parametrize("bad", [-1, 1 << 32, 2.0, "7"])
def test_a_bad_image_word_is_named(bad):
    """The reference machine checks its images at C speed when they are plain; any bad word is still found and
    named by its index, in a long image as in a short one."""
    cfg = Config()
    for at, image in ((2, [1, 3, bad]), (3000, [5] * 3000 + [bad] + [6] * 100)):
        with pytest.raises(ValueError, match=rf"^External memory image word {at} must be a 32-bit unsigned"):
            Machine(cfg).run([isa.halt()], image)
        with pytest.raises(ValueError, match=rf"^Scratchpad image word {at} must be a 32-bit unsigned"):
            Machine(cfg).run([isa.halt()], None, image)
