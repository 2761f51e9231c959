"""The DRAM behind the AXI4 port (``Config.memory``; ga2_sw/dram.py, docs/ARCHITECTURE.md "A DRAM behind the
port") and the DMA's stall counter.

The timing model is checked against the data sheet's arithmetic, done here by hand in nanoseconds (not with the
model's clock conversions); the chip is checked against the model on three subordinates that implement it apart:
the cycle model (``ga2_sw.cycles.ExternalPort``), the pysim subordinate (``sim.axi_mem``) and the Verilator
harness's C++ rendering. The stall counter is checked against what it claims to explain: in order, the cycles a
program runs beyond the cycle model's."""

import json
import math
import random

import pytest

from ga2_cli import main as ga2
from ga2_sw.config import Config
from ga2_sw.dram import GRADES, DramTiming, peak_bytes_per_cycle
from ga2_sw.isa import halt, ld, st
from ga2_sw.machine import run

from sim.backends import get_backend
from sim.compare import compare_results, format_program
from sim.random_programs import cycle_limit_for

from test_axi import AXI, _fence_jobs, _page_jobs, _pysim, _random_jobs

needs_verilator = pytest.mark.skipif(not get_backend("verilator").available(), reason="Verilator not installed")

DDR3_1600 = GRADES["ddr3-1600"]
NS = 10.0          # a chip cycle at 100 MHz, in ns
CONTROLLER = 2     # chip cycles each way through the controller (dram.CONTROLLER_CYCLES, stated in its docstring)


def _cycle_at(ns):
    """The first 100 MHz chip cycle that starts at or after ``ns``."""
    return math.ceil(ns / NS - 1e-9)


def test_grades_are_the_data_sheets():
    """MT41K256M16 -125 (DDR3-1600K) and -25E (DDR3-800E): the nanosecond figures, rounded up to clocks."""
    for name, tck, ns in (("ddr3-1600", 1.25, dict(trcd=13.75, trp=13.75, tras=35, trc=48.75, twr=15, trfc=260,
                                                   trefi=7800)),
                          ("ddr3-800", 2.5, dict(trcd=15, trp=15, tras=37.5, trc=52.5, twr=15, trfc=260,
                                                 trefi=7800))):
        grade = GRADES[name]
        assert grade.tck_ps == round(tck * 1000)
        for field, value in ns.items():
            assert getattr(grade, field) == math.ceil(value / tck - 1e-9), (name, field)
    assert (DDR3_1600.cl, DDR3_1600.cwl, GRADES["ddr3-800"].cl, GRADES["ddr3-800"].cwl) == (11, 8, 6, 5)


def test_first_read_hit_and_miss_by_hand():
    """A read to an idle bank: ACTIVATE, tRCD, READ, CL, four clocks of data; then a row hit; then a row miss in
    the same bank, which precharges first."""
    dram = DramTiming("ddr3-1600", 100)
    tck = 1.25
    # request in cycle 0 reaches the DRAM at the start of cycle 2 (20 ns)
    data_end = CONTROLLER * NS + 13.75 + 11 * tck + 4 * tck
    assert dram.read(0, 0, 4, 4) == [_cycle_at(data_end) + CONTROLLER] * 4
    # a hit in cycle 20 (the same 16 bytes' row), READ at once
    data_end = (20 + CONTROLLER) * NS + 11 * tck + 4 * tck
    assert dram.read(20, 64, 1, 4) == [_cycle_at(data_end) + CONTROLLER]
    # a miss in cycle 40: another row of bank 0 (16 KiB on); PRECHARGE, tRP, ACTIVATE, tRCD, READ
    data_end = (40 + CONTROLLER) * NS + 13.75 + 13.75 + 11 * tck + 4 * tck
    assert dram.read(40, 16384, 1, 4) == [_cycle_at(data_end) + CONTROLLER]


def test_write_then_read_waits_for_twtr():
    dram = DramTiming("ddr3-1600", 100)
    tck = 1.25
    dram.read(0, 0, 1, 4)                       # open the row
    done = dram.write(20, 0, 4, 4)              # a hit: WRITE at 22 cycles, CWL, data
    write_end = (20 + CONTROLLER) * NS + 8 * tck + 4 * tck
    assert done == _cycle_at(write_end) + CONTROLLER
    # a read taken the next cycle would issue at 23 cycles, but waits tWTR (7.5 ns) after the write's data
    read_end = write_end + 6 * tck + 11 * tck + 4 * tck
    assert dram.read(21, 32, 1, 4) == [_cycle_at(read_end) + CONTROLLER]


def test_streaming_reaches_the_bound_refresh_and_row_changes_leave():
    """Reading 1 MiB back to back: the data pins are busy but for row changes and refreshes. The in-order
    controller opens the next row only after the last READ of the one before, so a change costs tRCD - tCCD
    clocks into a closed bank and tRP + tRCD - tCCD into one with an old row open (every bank from the ninth
    row on); a refresh costs tRP + tRFC every tREFI, and its closed rows one more tRCD. So the data rate lies
    between the two bounds below, and one refresh passes per 7.8 us."""
    dram = DramTiming("ddr3-1600", 100)
    last, nbytes, beat = 0, 1 << 20, 16
    for n in range(nbytes // (256 * beat)):     # 256-beat bursts of 16 bytes, one request a cycle
        last = dram.read(n, n * 256 * beat, 256, beat)[-1]
    g = DDR3_1600
    per_row = 2048 // 16 * g.burst_ck           # data clocks of a 2 KiB row
    best = per_row / (per_row + g.trcd - g.tccd) * (1 - (g.trp + g.trfc) / g.trefi)
    worst = per_row / (per_row + g.trp + g.trcd - g.tccd) * (1 - (g.trp + g.trfc + g.trcd) / g.trefi)
    seconds_ns = last * NS
    achieved = nbytes / seconds_ns / (peak_bytes_per_cycle(g, 100) / NS)
    assert worst < achieved < best
    assert achieved > 0.9
    assert dram.refreshes == pytest.approx(seconds_ns / 7800, abs=1)


def test_config_memory_needs_the_axi_port():
    with pytest.raises(ValueError, match="'memory' must be ideal on the bare port"):
        Config(memory="ddr3-1600")
    with pytest.raises(ValueError, match="'memory' must be one of ideal, ddr3-1600, ddr3-800"):
        Config(axi=1, memory="ddr5")
    with pytest.raises(ValueError, match="'clock_mhz' must be in range 1..1000"):
        Config(clock_mhz=0)
    assert Config.from_dict(Config(axi=1, memory="ddr3-800").to_dict()).memory == "ddr3-800"


def test_pysim_dram_subordinate_is_the_cycle_model():
    """Bursts across 4 KiB, an ST read back across a refresh: the pysim subordinate's DRAM and the cycle
    model's agree to the cycle, stall counter included, and a DRAM stall really happens."""
    for name in ("inorder", "packed-4"):
        config = AXI[name].replace(ext_words=2048, memory="ddr3-1600")
        rng = random.Random(5)
        ext = [rng.randrange(1 << 32) for _ in range(2048)]
        program = [ld(0, 3, 13), ld(20, 1020, 9), st(0, 1030, 13), ld(60, 1030, 13), st(60, 2040, 8),
                   ld(100, 0, 700), halt()]
        want = run(program, config, ext)
        got = _pysim(config, program, ext)
        assert not compare_results(want, got), name
        assert want.counters.stall > 0 and want.counters.cycles > run(program, AXI[name].replace(
            ext_words=2048), ext).counters.cycles


VERILATOR_DRAM = {
    "inorder-ddr3-1600": AXI["inorder"].replace(memory="ddr3-1600"),
    "packed-4-ddr3-800-137mhz": AXI["packed-4"].replace(memory="ddr3-800", clock_mhz=137),
    "decoupled-ddr3-1600-250mhz": AXI["decoupled"].replace(memory="ddr3-1600", clock_mhz=250),
    "packed-16-ddr3-1600": AXI["packed-16"].replace(memory="ddr3-1600"),
    "packed-4-slow-b-ddr3-1600": AXI["packed-4-slow-b"].replace(memory="ddr3-1600", clock_mhz=60),
}


@needs_verilator
@pytest.mark.parametrize("name", [pytest.param(n, marks=() if i < 2 else pytest.mark.slow)
                                  for i, n in enumerate(VERILATOR_DRAM)])
def test_verilator_dram_subordinate_is_the_cycle_model(name):
    """Random programs (faults too), crowded loads and stores, bursts across pages: memories and all six
    counters equal to the reference machine's, whose timing includes the DRAM; most programs stall."""
    config = VERILATOR_DRAM[name]
    jobs = _random_jobs(config, 50, seed=21) + _fence_jobs(config, 30, seed=22) + _page_jobs(config, 15, seed=23)
    results = get_backend("verilator").run_many(config, [(p, e, s, 20 * cycle_limit_for(p, config))
                                                         for p, e, s in jobs])
    stalled = 0
    for (program, ext, sp), got in zip(jobs, results):
        want = run(program, config, ext, sp)
        diffs = compare_results(want, got)
        assert not diffs, format_program(program) + "\n" + "\n".join(diffs)
        stalled += got.counters.stall > 0
    assert stalled > len(jobs) // 2


@needs_verilator
def test_stall_counter_explains_the_extra_cycles():
    """In order under random backpressure, a program without stores runs exactly its stall count longer than
    the cycle model says (nothing else waits on the bus); with stores, at least that (a HALT also waits for the
    last answer on B, which is not the DMA's stall)."""
    from sim.verilator import VerilatorSim
    config = AXI["inorder"]
    jobs = _random_jobs(config, 40, seed=31, faults=False) + _page_jobs(config, 10, seed=32)
    loads_only = [(p, e, s) for p, e, s in _random_jobs(config, 60, seed=33, faults=False)
                  if not any(i.op.name == "ST" for i in p if hasattr(i, "op"))]
    sim = VerilatorSim(config)
    try:
        results = sim.run_many([(p, e, s, 20 * cycle_limit_for(p, config)) for p, e, s in jobs + loads_only],
                               axi_pause=0.5, axi_seed=3)
    finally:
        sim.close()
    exact = 0
    for n, ((program, ext, sp), got) in enumerate(zip(jobs + loads_only, results)):
        want = run(program, config, ext, sp)
        extra, stall = got.counters.cycles - want.counters.cycles, got.counters.stall - want.counters.stall
        if n >= len(jobs):
            assert extra == stall, format_program(program)
            exact += stall > 0
        else:
            assert extra >= stall >= 0, format_program(program)
    assert exact >= 10


def test_decode_table_reports_stalls_and_the_dram_fraction(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert ga2(["decode-table", "--chip", "axi", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["programs"]
    ideal = tmp_path / "i.json"
    assert ga2(["decode-table", "--chip", "axi", "--memory", "ideal", "--json", str(ideal)]) == 0
    for row, base in zip(rows, json.loads(ideal.read_text())["programs"]):
        assert row["memory"] == "ddr3-1600" and row["stall_cycles"] > 0 and base["stall_cycles"] == 0
        assert row["cycles"] > base["cycles"]
        # bytes on the wires over the step's time, against 3.2 GB/s at 100 MHz (32 bytes a cycle)
        assert row["dram_bandwidth_fraction"] == pytest.approx(row["beats"] * 4 / (row["cycles"] * 32), abs=1e-4)
    assert "of DRAM peak" in capsys.readouterr().out


def test_memory_and_the_bare_port_is_one_line(capsys):
    assert ga2(["decode-table", "--memory", "ddr3-1600", "--axi", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "memory" in err[0] and "axi" in err[0]
    # a DRAM answers the AXI4 port: the command line turns it on no more than Config does
    assert ga2(["decode-table", "--memory", "ddr3-1600"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "memory" in err[0] and "axi" in err[0]
