# amaranth: UnusedElaboratable=no
"""Tests written to kill RTL mutants that the rest of the suite let through (``ga2 mutants --rtl``,
``sim/rtl_mutants.py``). Each test names the mutant(s) it kills; each checks documented behaviour against
the reference (numpy, the reference machine), not the mutant itself. All pysim, a few seconds in all."""

import numpy as np
import pytest

from ga2_hdl.matrix.systolic import SystolicArray
from sim.testing import run_bench
from ga2_sw.config import Config
from ga2_sw.isa import Err, ld, st, mm, rq, sm, halt
from ga2_sw.machine import run
from ga2_sw.numerics import MAX_SHIFT
from sim.pysim_runner import run_pysim


# -- systolic: "skew registers ignore clear" ---------------------------------------------------------------

def test_array_clear_zeroes_the_skew_registers():
    """``clear`` zeroes EVERY register of the array (systolic.py), the skew registers included: steps with
    data, a clear in mid-stream, then a product from zero. Inside the chip the matrix unit's flush always
    leaves zeros in the skew chains, so only the array's own contract can tell."""
    rows, cols = 3, 3
    dut = SystolicArray(rows=rows, cols=cols)
    rng = np.random.default_rng(7)
    A = rng.integers(-128, 128, (rows, 4))
    B = rng.integers(-128, 128, (4, cols))

    async def tb(ctx):
        for _ in range(2):                       # garbage into the skew chains
            ctx.set(dut.a, [int(x) for x in rng.integers(-128, 128, rows)])
            ctx.set(dut.b, [int(x) for x in rng.integers(-128, 128, cols)])
            ctx.set(dut.step, 1)
            await ctx.tick()
        ctx.set(dut.step, 0)
        ctx.set(dut.clear, 1)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        K = A.shape[1]
        for t in range(K + rows + cols - 1):
            ctx.set(dut.a, [int(A[r, t]) if t < K else 0 for r in range(rows)])
            ctx.set(dut.b, [int(B[t, c]) if t < K else 0 for c in range(cols)])
            ctx.set(dut.step, 1)
            await ctx.tick()
        ctx.set(dut.step, 0)
        acc = np.array(list(ctx.get(dut.acc))).reshape(rows, cols)
        assert np.array_equal(acc, A @ B)

    run_bench(dut, tb)


# -- checker: range boundaries, footprints, error ranking ----------------------------------------------------

SMALL = Config(sp_words=256, ext_words=256, imem_words=16)
EXT = [(i * 2654435761) & 0xFFFFFFFF for i in range(256)]
SP = [(i * 40503 + 17) & 0xFFFFFFFF for i in range(256)]


def same_as_machine(prog, config=SMALL):
    e = run(prog, config, EXT, SP)
    r = run_pysim(config, prog, EXT, SP, cycle_limit=4 * e.counters.cycles + 100)     # a hang fails fast
    assert (r.error, r.pc, r.counters) == (e.error, e.pc, e.counters), (r.error, e.error, r.counters, e.counters)
    assert r.sp == e.sp and r.ext == e.ext
    return r


@pytest.mark.parametrize("instr, code", [
    (st(0, 256 - 7, 7), Err.NONE),                              # ends on the last external word
    (st(0, 256 - 6, 7), Err.EXT_RANGE),                         # one past it
    (ld(0, 256 - 6, 7), Err.EXT_RANGE),
    (mm(250, 0, 20, 2, 5, 3, 0, 5, 3, 3), Err.NONE),            # C ends on the last scratchpad word
    (mm(251, 0, 20, 2, 5, 3, 0, 5, 3, 3), Err.SP_RANGE),        # one past it
    (mm(0, 100, 246, 1, 5, 2, 1, 5, 5, 1), Err.NONE),           # tb = 1: B + (N-1)*ldb + K-1 = 255
    (mm(0, 100, 247, 1, 5, 2, 1, 5, 5, 1), Err.SP_RANGE),
    (mm(0, 100, 200, 1, 2, 4, 0, 2, 50, 4), Err.NONE),          # tb = 0: B + (K-1)*ldb + N-1 = 253
    (mm(0, 100, 203, 1, 2, 4, 0, 2, 50, 4), Err.SP_RANGE),
    (mm(255, 0, 0, 1, 1, 5), Err.SHAPE),                        # N > cols AND past the end: shape first
    (ld(250, 250, 7), Err.SP_RANGE),                            # both ranges out: the scratchpad's first
    (mm(255, 0, 0, 1, 0, 1), Err.SHAPE),                        # K = 0
    (rq(0, 8, 4, 3, MAX_SHIFT), Err.NONE),
    (rq(0, 8, 4, 3, MAX_SHIFT + 1), Err.SHAPE),
    (sm(0, 0, SMALL.sm_max_len), Err.NONE),
    (rq(8, 8, 4, 3, 1), Err.NONE),                              # in place
    (rq(12, 8, 4, 3, 1), Err.NONE),                             # right after its source
    (rq(4, 8, 4, 3, 1), Err.NONE),                              # right before it
    (rq(11, 8, 4, 3, 1), Err.OVERLAP),                          # one word over it
    (rq(5, 8, 4, 3, 1), Err.OVERLAP),
    (rq(254, 253, 4, 3, 1), Err.OVERLAP),                       # overlapping AND past the end: overlap first
    (ld(0, 0x1_0000, 1), Err.EXT_RANGE),                        # the external address's high half (xhi) counts
    (st(0, 0x2_0005, 1), Err.EXT_RANGE),
], ids=["ext-last", "ext-past", "ld-ext-past", "mm-c-last", "mm-c-past", "mm-tb1-last", "mm-tb1-past",
        "mm-tb0-last", "mm-tb0-past", "shape-over-range", "sp-over-ext", "k0", "rq-max-shift", "rq-shift-past",
        "sm-max-len", "rq-in-place", "rq-after", "rq-before", "rq-over-after", "rq-over-before", "overlap-over-range",
        "ld-xhi-past", "st-xhi-past"])
def test_checker_boundaries(instr, code):
    """chk mutants: range checks off by one, footprint ignoring tb, shape/range/overlap ranking, missing
    checks."""
    r = same_as_machine([ld(0, 0, 40), instr, halt()])
    assert r.error == code


# -- checker: MM's rb (Config.row_b) --------------------------------------------------------------------------

ROW_B = Config(mode="decoupled", sp_words=256, ext_words=256, imem_words=16, row_b=1)


def _slow(*case):
    return pytest.param(*case, marks=pytest.mark.slow)


@pytest.mark.parametrize("config, instr, code", [
    # (each case on the row_b chip elaborates it in pysim, about 15 s: they run in the slow tier and in
    # `ga2 mutants --rtl`, which runs a file's every test; in the default tier the random programs on a row_b
    # chip draw MMs whose rb runs row M-1's B past the end, on Verilator: tests/test_differential.py)
    _slow(ROW_B, mm(0, 100, 200, 3, 5, 2, 0, 20, 4, 2, rb=1), Err.SP_RANGE),  # row 2's B ends at 200 + 40 + 17
    _slow(ROW_B, mm(0, 100, 198, 3, 5, 2, 0, 20, 4, 2, rb=1), Err.NONE),      # ... at 255, the last word
    _slow(ROW_B, mm(0, 100, 199, 3, 5, 2, 0, 20, 4, 2, rb=1), Err.SP_RANGE),  # row 0's B fits, row 2's does not
    _slow(ROW_B, mm(0, 100, 199, 3, 5, 2, 0, 20, 4, 2), Err.NONE),            # without rb only row 0's B is read
    (SMALL.replace(mode="decoupled"), mm(0, 0, 0, 2, 3, 2, rb=1), Err.ILLEGAL),   # no row_b: rb is stray
    (SMALL, mm(0, 0, 0, 2, 3, 2, rb=1), Err.ILLEGAL),
], ids=["rb-past", "rb-last", "rb-one-past", "no-rb-fits", "rb-unbuilt-decoupled", "rb-unbuilt-inorder"])
def test_checker_rb(config, instr, code):
    """chk mutants "rb's B range ends at row 0's B" and "rb is legal on a chip built without row_b": B's range
    with rb runs to row M-1's last operand, B + (M-1)*lda + (K-1)*ldb + N-1 (docs/ISA.md), and rb on a chip
    without row_b faults ILLEGAL."""
    r = same_as_machine([ld(0, 0, 40), instr, halt()], config)
    assert r.error == code


@pytest.mark.parametrize("config, instr, code", [
    (ROW_B, mm(0, 251, 0, 3, 5, 2, 0, 20, 4, 2, sa=1), Err.NONE),            # row 0's A ends at 255, the last word
    _slow(ROW_B, mm(0, 252, 0, 3, 5, 2, 0, 20, 4, 2, sa=1), Err.SP_RANGE),        # ... at 256
    _slow(ROW_B, mm(0, 251, 0, 3, 5, 2, 0, 20, 4, 2), Err.SP_RANGE),              # without sa row 2's A ends at 295
    _slow(ROW_B, mm(0, 251, 100, 3, 5, 2, 0, 20, 4, 2, rb=1, sa=1), Err.NONE),    # rb's Bs still span (M-1)*lda: 157
    _slow(ROW_B, mm(0, 251, 199, 3, 5, 2, 0, 20, 4, 2, rb=1, sa=1), Err.SP_RANGE),   # ... 256: row 2's B past
    (SMALL.replace(mode="decoupled"), mm(0, 0, 0, 2, 3, 2, sa=1), Err.ILLEGAL),   # no row_b: sa is stray
    (SMALL, mm(0, 0, 0, 2, 3, 2, sa=1), Err.ILLEGAL),
], ids=["sa-last", "sa-past", "no-sa-past", "sa-rb-fits", "sa-rb-past", "sa-unbuilt-decoupled", "sa-unbuilt-inorder"])
def test_checker_sa(config, instr, code):
    """chk mutants "sa's A range spans every row" and "sa is legal on a chip built without row_b": A's range
    with sa is row 0's alone, A + K-1 (docs/ISA.md), while rb's Bs still reach (M-1)*lda past B; and sa on a
    chip without row_b faults ILLEGAL."""
    r = same_as_machine([ld(0, 0, 40), instr, halt()], config)
    assert r.error == code


# -- DMA: external addresses above 16 bits (their high half in xhi) --------------------------------------------

def test_dma_external_addresses_above_16_bits():
    """dma mutants: LD's or ST's external address without its high half."""
    config = Config(sp_words=256, ext_words=1 << 17, imem_words=16)
    ext = [0] * config.ext_words
    for n in range(6):
        ext[0xFFFE + n] = (n * 2654435761 + 5) & 0xFFFFFFFF        # straddles 65,536
        ext[0x1_2345 + n] = n + 1
    prog = [ld(0, 0xFFFE, 6), ld(8, 0x1_2345, 6), st(0, 0x1_F000, 14), st(8, 0x0_0010, 2), halt()]
    e = run(prog, config, ext)
    r = run_pysim(config, prog, ext, cycle_limit=4 * e.counters.cycles + 100)
    assert e.ext[0x1_F000:0x1_F00E] == ext[0xFFFE:0xFFFE + 6] + [0, 0] + list(range(1, 7))
    assert (r.error, r.counters, r.ext, r.sp) == (e.error, e.counters, e.ext, e.sp)


# -- softmax: "running max initialised to 0 instead of -128" -------------------------------------------------

@pytest.mark.parametrize("scores", [[-5, -20, -1, -70, -128, -33], [-100, -101], [-1, -128, -64]])
def test_softmax_of_all_negative_scores(scores):
    """Scores that are all negative, with different values: the maximum is below 0, so a maximum that
    starts from 0 instead of -128 shifts every exp index and the rounding of every probability."""
    sp = [s & 0xFFFFFFFF for s in scores] + SP[len(scores):]
    prog = [sm(100, 0, len(scores)), halt()]
    e = run(prog, SMALL, EXT, sp)
    r = run_pysim(SMALL, prog, EXT, sp, cycle_limit=4 * e.counters.cycles + 100)
    assert r.sp == e.sp and r.counters == e.counters and r.error == e.error == Err.NONE


# -- DMA: "one read too few issued" and other hangs, found in seconds --------------------------------------------

@pytest.mark.parametrize("latency", [1, 4])
def test_short_transfers_finish_within_their_cycle_count(latency):
    """LD/ST of 1, 2 and 3 words with a cycle limit of a few times their cost: a DMA that waits for a word
    it never requested hangs, and the limit turns the hang into a failure within seconds instead of the
    default cycle limit of run_pysim (sim.jobs.DEFAULT_CYCLE_LIMIT)."""
    config = Config(sp_words=256, ext_words=256, imem_words=16, ext_latency=latency)
    prog = [ld(10, 20, 1), ld(30, 40, 2), ld(50, 60, 3), st(10, 100, 1), st(30, 110, 3), halt()]
    e = run(prog, config, EXT, SP)
    r = run_pysim(config, prog, EXT, SP, cycle_limit=4 * e.counters.cycles)
    assert (r.error, r.counters, r.sp, r.ext) == (e.error, e.counters, e.sp, e.ext)


# -- sequencer: "PC overflow not detected", with a cycle limit -------------------------------------------------

def test_pc_overflow_within_a_cycle_limit():
    """A full instruction memory without HALT ends in PC_OVERFLOW; a sequencer that misses the overflow
    wraps to word 0 and runs forever, which the limit turns into a failure in seconds."""
    prog = [ld(0, 0, 1)] * SMALL.imem_words
    r = same_as_machine(prog)
    assert r.error == Err.PC_OVERFLOW and r.pc == SMALL.imem_words
