"""The whole chip in pysim against the reference machine, the cycle model and the integer reference."""

import pytest

from ga2_sw import decode as dec
from ga2_sw.chips import chip
from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.isa import Err, ld, st, mm, rq, sm, halt, encode
from ga2_sw.machine import run
from ga2_sw.workloads import decode_table_programs
from sim.jobs import HangError, Job, check_job
from sim.pysim_runner import run_pysim
from sim.testing import assert_same

CONFIG = Config()
DECOUPLED = Config(mode="decoupled")
PROGRAMS = decode_table_programs(CONFIG)
CHAPTER = [3827, 5777, 7727, 9677, 6452]
# The default tier runs the ragged B = 4 step on pysim in both modes (every sequence at its own length: the
# step the other four are special cases of); the slow tier all five. The default tier runs all five on the model
# and Verilator (tests/test_verilator.py).
RAGGED = 4
CASES = [pytest.param(cfg, n, p, id=f"{cfg.mode.value}-{p.name}", marks=[] if n == RAGGED else [pytest.mark.slow])
         for cfg in (CONFIG, DECOUPLED) for n, p in enumerate(decode_table_programs(cfg))]


@pytest.mark.parametrize("config, index, p", CASES)
def test_chapter_program(config, index, p):
    counters, err, _ = cycle_counts(p.program, config)
    # A cycle limit near the model's count: a broken chip that never halts fails in seconds, not minutes.
    r = run_pysim(config, p.program, p.ext, cycle_limit=2 * counters.cycles + 100)
    assert_same(run(p.program, config, p.ext), r, p.name)
    assert err == Err.NONE and r.counters == counters
    assert r.counters.cycles <= CHAPTER[index]
    # Independent of the machine: every sequence's output equals the plain-Python integer reference.
    lengths = p.lengths
    w = dec.make_workload(config, p.batch, max(lengths), 4242 if len(set(lengths)) == 1 else 4242 + 101)
    for b, L in enumerate(lengths):
        assert dec.outputs(config, r.ext, b) == dec.int_reference(w, b, L)


def test_decode_sequence_of_steps():
    """Four consecutive steps of a batch of two, the chip's memory carried from step to step."""
    w = dec.make_workload(CONFIG, 2, 4, 77)
    P = dec.rq_params(w)
    ext_chip = ext_ref = dec.ext_image(w)
    for t in range(1, 5):
        prog = dec.program(CONFIG, [0, 1], [t, t], P)
        r = run_pysim(CONFIG, prog, ext_chip)
        expect = run(prog, CONFIG, ext_ref)
        assert_same(expect, r, f"step {t}")
        ext_chip, ext_ref = r.ext, expect.ext
        for b in (0, 1):
            assert dec.outputs(CONFIG, r.ext, b) == dec.int_reference(w, b, t)


@pytest.mark.parametrize("config, batch, length", [
    (chip("chapter2").config, 2, 5),
    pytest.param(chip("chapter8").config, 8, 3, marks=pytest.mark.slow),
    (Config(rows=3, cols=5, d_model=12, d=10, max_ctx=7), 3, 7),
], ids=["2x2", "8x8", "3x5-d10"])
def test_other_array_sizes(config, batch, length):
    w = dec.make_workload(config, batch, length, 5)
    P = dec.rq_params(w)
    ext = dec.ext_image(w)
    seqs = list(range(batch))
    for t in range(1, length):
        ext = run(dec.program(config, seqs, [t] * batch, P), config, ext).ext
    prog = dec.program(config, seqs, [length] * batch, P)
    r = run_pysim(config, prog, ext)
    assert_same(run(prog, config, ext), r, f"{config.rows}x{config.cols}")
    assert r.counters == cycle_counts(prog, config)[0]
    for b in seqs:
        assert dec.outputs(config, r.ext, b) == dec.int_reference(w, b, length)


SMALL = Config(sp_words=256, ext_words=256, imem_words=16)
EXT = [(i * 2654435761) & 0xFFFFFFFF for i in range(256)]
PREFIX = [ld(0, 10, 40), mm(100, 0, 20, 2, 5, 3, 0, 5, 3, 3), rq(120, 100, 6, 1000, 9)]


@pytest.mark.parametrize("bad, code", [
    (7, Err.ILLEGAL),                                          # unknown opcode
    (encode(halt()) | (1 << 100), Err.ILLEGAL),                # a stray bit
    (encode(ld(250, 0, 7)), Err.SP_RANGE),                     # past the scratchpad
    (encode(st(0, 250, 7)), Err.EXT_RANGE),                    # past the external memory
    (encode(mm(0, 0, 0, 4, 1, 1)) + (1 << 72), Err.SHAPE),     # M = 5 > rows
    (encode(sm(0, 0, 65)), Err.SHAPE),                         # longer than sm_max_len
    (encode(mm(200, 0, 0, 1, 1, 4)), Err.NONE),                # control: a legal instruction
], ids=["opcode", "stray-bit", "sp-range", "ext-range", "M>rows", "sm-len", "legal"])
def test_fault_halts_and_writes_nothing(bad, code):
    prog = [encode(i) for i in PREFIX] + [bad, encode(ld(0, 0, 200)), encode(halt())]
    r = run_pysim(SMALL, prog, EXT)
    expect = run(prog, SMALL, EXT)
    assert_same(expect, r, "faulting program")
    assert r.error == code
    if code != Err.NONE:
        assert r.pc == len(PREFIX)
        before = run([encode(i) for i in PREFIX] + [encode(halt())], SMALL, EXT)
        assert r.sp == before.sp and r.ext == before.ext          # the faulting instruction wrote nothing
        assert r.counters.instructions == len(PREFIX)


def test_pc_overflow_and_hang_limit():
    prog = [encode(ld(0, 0, 1))] * SMALL.imem_words
    r = run_pysim(SMALL, prog, EXT)
    assert r.error == Err.PC_OVERFLOW and r.counters == run(prog, SMALL, EXT).counters
    with pytest.raises(HangError, match="did not halt within 100 cycles"):
        run_pysim(SMALL, [ld(0, 0, 200), halt()], EXT, cycle_limit=100)


@pytest.mark.parametrize("latency", [1, 2, 7])
def test_dma_latencies(latency):
    config = Config(sp_words=256, ext_words=256, imem_words=16, ext_latency=latency)
    prog = [ld(3, 17, 50), st(3, 200, 50), ld(100, 199, 52), st(120, 0, 1), ld(255, 255, 1), halt()]
    r = run_pysim(config, prog, EXT)
    assert_same(run(prog, config, EXT), r, f"latency {latency}")
    assert r.counters.dma == (50 + latency) + 51 + (52 + latency) + 2 + (1 + latency)
    assert r.sp[3:53] == EXT[17:67] and r.ext[200:250] == EXT[17:67]


@pytest.mark.parametrize("config", [
    pytest.param(DECOUPLED, id="decoupled", marks=pytest.mark.slow),    # its loading: every pysim test
    pytest.param(DECOUPLED.replace(bus_bytes=4), id="packed", marks=pytest.mark.slow),
    pytest.param(DECOUPLED.replace(bus_bytes=4, axi=1, memory="ddr3-1600"), id="axi-ddr3")])
def test_a_reused_chip_runs_as_a_fresh_one(config):
    """``run_pysim`` elaborates a chip once and resets it between programs (``PysimChip``): after a program that
    is stopped midway (its loads and matrix products in flight), each next program (one that faults on whole
    memory images, one that runs every unit, one that stores over a whole image) leaves the memories,
    counters, error and pc of the reference machine, as a fresh chip does."""
    from sim.pysim_runner import PysimChip
    from sim.random_programs import cycle_limit_for, fuzz_job
    p = PROGRAMS[0]
    chip = PysimChip(config)
    stopped = chip.run(check_job(Job(p.program, p.ext, None, 300), config), p.ext, None, 300, on_hang="return")
    assert stopped.hang and stopped.counters.cycles < run(p.program, config, p.ext).counters.cycles
    for seed in (31, 5, 38):
        program, ext, sp = fuzz_job(config, seed)
        limit = cycle_limit_for(program, config)
        r = chip.run(check_job(Job(program, ext, sp, limit), config), ext, sp, limit)
        assert_same(run(program, config, ext, sp), r, f"seed {seed}")
