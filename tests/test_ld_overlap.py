"""Overlapped loads (Config.ld_overlap, docs/ARCHITECTURE.md "Overlapped loads"): the DMA takes an LD from the cycle
after the last LD's last request, while that LD's beats still come in, and holds two. A timeline worked by hand,
pysim (which watches every bank for two accesses in one cycle) against the model on programs that take every
branch of the rule, the strength of the random programs the Verilator tests run, and what the option does to the
decode step."""

import random

import pytest

from ga2_sw import isa
from ga2_sw.config import Config
from ga2_sw.cycles import DecoupledTimer, conflict, cycle_counts
from ga2_sw.isa import Op
from ga2_sw.machine import Machine
from ga2_sw.packing import beats
from ga2_sw.workloads import decode_table_programs
from sim.pysim_runner import run_pysim
from sim.random_programs import FUZZ_CONFIG, fuzz_job, random_words
from ga2_sw.chips import chip

OVERLAP = Config(mode="decoupled", bus_bytes=4, sp_banks=8, ld_overlap=1)
# Fuzz chips of tests/test_differential.py (LD_OVERLAP there).
FUZZ_OVERLAP = FUZZ_CONFIG.replace(mode="decoupled", bus_bytes=4, ld_overlap=1)

# 10 beats, 1 beat, 2 beats (4 bytes a beat), then an ST of 2 beats.
LONG = isa.ld(dst=0, src=0, len=40)
SHORT = isa.ld(dst=100, src=64, len=4)
THIRD = isa.ld(dst=200, src=128, len=8)
STORE = isa.st(src=300, dst=400, len=8)


def hang_limit(ref):
    return ref.counters.cycles + 200


def timeline(program, config):
    timer = DecoupledTimer(config)
    for instr in program:
        timer.issue(instr)
    return [(start, end) for _, start, end in timer.starts], timer.stop(True)


def test_three_loads_and_a_store_worked_by_hand():
    """By hand, with ext_latency 4: LD 1 starts in cycle 2 (fetch, decode), requests its 10 beats in 3..12 and
    writes the last in 16 (10 + 4 busy cycles). LD 2 is decoded in 3 and takes the lane in 13, the cycle after LD
    1's last request: one beat, requested in 14, written in 18. LD 3 could follow LD 2's request (15) but LD 1,
    the LD before LD 2, still writes until 16: it starts in 17 (the DMA holds two LDs), its 2 beats written by
    23. The ST waits for the last LD write (its reads would meet them on port A): 24, 2 beats + the 2-cycle
    read latency. HALT leaves its check state in 29, the last counted cycle: 30 cycles. The DMA counter counts
    the cycles in which any of them is busy or writing once: 14 + 2 + 5 + 4 = 25. Without the option each waits
    for the one before: 36 cycles."""
    program = [LONG, SHORT, THIRD, STORE]
    starts, counters = timeline(program, OVERLAP)
    assert starts == [(2, 16), (13, 18), (17, 23), (24, 28)]
    assert (counters.cycles, counters.dma, counters.instructions) == (30, 25, 5)
    starts, counters = timeline(program, OVERLAP.replace(ld_overlap=0))
    assert starts == [(2, 16), (17, 22), (23, 29), (30, 34)] and counters.cycles == 36


PROGRAMS = {
    "three loads and a store": [LONG, SHORT, THIRD, STORE, isa.halt()],
    # a second LD whose range meets the first's: it waits for the first's last write (the scoreboard's DMA entry,
    # in flight while the DMA drains), and a third that meets the second's while the first still writes
    "loads on each other's words": [LONG, isa.ld(dst=30, src=64, len=20), isa.ld(dst=45, src=130, len=3),
                                    isa.halt()],
    # partial first and last beats on both sides of the handover
    "unaligned loads back to back": [isa.ld(dst=7, src=1, len=9), isa.ld(dst=100, src=66, len=3),
                                     isa.ld(dst=200, src=131, len=30), isa.halt()],
    # an MM on the first LD's words while the second still loads, then an ST behind the MM's results
    "an MM between loads": [LONG, isa.ld(dst=40, src=64, len=20), isa.mm(900, 0, 40, 2, 4, 3, lda=4, ldb=3, ldc=3),
                            isa.ld(dst=60, src=100, len=12), isa.st(src=900, dst=300, len=6), isa.halt()],
    # an RQ reading an older LD's words (the scoreboard's second DMA entry) while a newer LD loads
    "an RQ on the older load": [LONG, SHORT, isa.rq(dst=500, src=0, len=40, m=3, s=2), THIRD, isa.halt()],
    # a fault in the instruction after a load: the error waits for the last write
    "a fault behind two loads": [LONG, SHORT, isa.mm(900, 0, 40, 0, 4, 3, lda=4, ldb=3, ldc=3), isa.halt()],
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_pysim_matches_the_model(name):
    """Memories, all six counters, error and pc; pysim also fails the run if any bank sees two accesses in one
    cycle (a second LD's writes against an ST's reads, say)."""
    program = PROGRAMS[name]
    rng = random.Random(name)
    ext, sp = random_words(rng, 256), random_words(rng, 1000)
    ref = Machine(OVERLAP).run(program, ext, sp)
    got = run_pysim(OVERLAP, program, ext, sp, cycle_limit=hang_limit(ref))
    assert (got.counters, got.error, got.pc) == (ref.counters, ref.error, ref.pc)
    assert got.sp == ref.sp and got.ext == ref.ext


def test_pysim_at_ext_latency_one():
    """With ext_latency 1 an LD's last beat comes the cycle after its last request, so the next LD starts in the
    very cycle the last one writes its last beat (the queue moves its context at once, `older` never rises); pysim
    against the model on LDs of 10, 1 and 2 beats, an ST and two more LDs."""
    config = OVERLAP.replace(ext_latency=1)
    program = [LONG, SHORT, THIRD, STORE, isa.ld(dst=500, src=3, len=13), isa.ld(dst=600, src=70, len=2), isa.halt()]
    starts, _ = timeline(program[:-1], config)
    loads = [(s, e) for (s, e), i in zip(starts, program) if i.op == Op.LD]
    assert sum(later[0] == earlier[1] for earlier, later in zip(loads, loads[1:])) >= 3, loads
    rng = random.Random("ext latency one")
    ext, sp = random_words(rng, 256), random_words(rng, 1000)
    ref = Machine(config).run(program, ext, sp)
    got = run_pysim(config, program, ext, sp, cycle_limit=hang_limit(ref))
    assert (got.counters, got.error, got.pc, got.sp, got.ext) == (ref.counters, ref.error, ref.pc, ref.sp, ref.ext)


def branch_counts(config, programs):
    """Counts, on the model, over ``programs``: LDs that start while the LD before them still writes; LDs held
    back by the LD before the last (the DMA holds two); instructions held back by a conflict with an LD that has
    made its requests and only writes; STs held for the last LD write. Each program runs up to its first fault."""
    counts = {"following": 0, "older": 0, "draining conflict": 0, "store": 0}
    for program in programs:
        timer, loads = DecoupledTimer(config), []         # loads: (instr, start, end)
        for instr in program:
            if instr.op == Op.HALT or isa.check(instr, config) is not isa.Err.NONE:
                break
            ready, lane_free, drained = timer.lane_ready(instr), timer.free["dma"], timer._ld_drained
            requested = lambda load: load[1] + beats(load[0].src, load[0].len, config)   # noqa: E731
            counts["draining conflict"] += any(
                other.op == Op.LD and requested((other, start, end)) < ready and conflict(instr, other)
                for other, start, end in timer.in_flight(ready))
            start = timer.issue(instr)
            if instr.op == Op.LD:
                counts["following"] += bool(loads) and loads[-1][2] >= start
                counts["older"] += len(loads) >= 2 and loads[-2][2] >= loads[-1][1] and \
                    ready == loads[-2][2] + 1 > requested(loads[-1]) + 1
                loads.append((instr, start, timer.starts[-1][2]))
            elif instr.op == Op.ST:
                counts["store"] += drained == ready > lane_free
    return counts


def test_the_programs_take_every_branch():
    """The hand programs above start LDs beside a draining LD, hold one back for the LD before the last, hold
    instructions back on a conflict with a draining LD, and hold an ST for the last write."""
    counts = branch_counts(OVERLAP, PROGRAMS.values())
    assert counts["following"] >= 4 and min(counts.values()) >= 1, counts


def fuzz_programs(seeds):
    return [fuzz_job(FUZZ_OVERLAP, seed, fault_rate=0.0)[0] for seed in seeds]


def test_the_fuzz_generator_exercises_the_rule():
    """The strength of the random programs the Verilator tests run on the option (tests/test_differential.py,
    LD_OVERLAP), measured on the model over 400 of their seeds."""
    counts = branch_counts(FUZZ_OVERLAP, fuzz_programs(range(400)))
    assert min(counts.values()) >= 10, counts


def test_random_programs_on_pysim():
    """A few random programs in which an LD is held back by the LD before the last, on pysim."""
    picked, seed = [], 0
    while len(picked) < 3:
        if branch_counts(FUZZ_OVERLAP, fuzz_programs([seed]))["older"]:
            picked.append(fuzz_job(FUZZ_OVERLAP, seed, fault_rate=0.0))
        seed += 1
    for program, ext, sp in picked:
        ref = Machine(FUZZ_OVERLAP).run(program, ext, sp)
        got = run_pysim(FUZZ_OVERLAP, program, ext, sp, cycle_limit=hang_limit(ref))
        assert (got.counters, got.error, got.pc, got.sp, got.ext) == \
            (ref.counters, ref.error, ref.pc, ref.sp, ref.ext)


def test_the_decode_step_gains():
    """The decode steps at 4 bytes a beat on 32 banks: overlapped loads take the DMA lane's busy time down, no
    step is slower, and the B = 4 step gains on the fastest chip (row writes, overlapped RQs:
    1,192 -> 1,180 cycles when this was written)."""
    base = chip("fast").config.replace(sp_banks=32, row_b=0, ld_overlap=0, rq_lanes=1, sm_lanes=1)
    plain = [cycle_counts(p.program, base)[0] for p in decode_table_programs(base)]
    overlap = [cycle_counts(p.program, base.replace(ld_overlap=1))[0]
               for p in decode_table_programs(base.replace(ld_overlap=1))]
    assert all(o.cycles <= p.cycles and o.dma < p.dma for o, p in zip(overlap, plain)), (plain, overlap)
    assert overlap[3].cycles < plain[3].cycles and overlap[0].cycles < 0.95 * plain[0].cycles, (plain, overlap)


def test_config_rules(capsys):
    """The option needs the decoupled chip's bare packed port; the command line says so in one line (exit
    status 2)."""
    from ga2_cli import main
    with pytest.raises(ValueError, match="'ld_overlap' must be 0 in inorder mode"):
        Config(ld_overlap=1)
    for bad in (dict(), dict(bus_bytes=4, axi=1)):
        with pytest.raises(ValueError, match="'ld_overlap' needs the bare packed port"):
            Config(mode="decoupled", ld_overlap=1, **bad)
    assert main(["decode-table", "--mode", "decoupled", "--ld-overlap", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "ld_overlap" in err and "bus_bytes" in err and len(err.splitlines()) == 1, err
    assert main(["decode-table", "--mode", "decoupled", "--bus-bytes", "4", "--ld-overlap", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "ld-overlap" in err.replace("_", "-") and "0..1" in err, err


def test_bus_width_says_which_chip(capsys):
    """`ga2 bus-width` names the options the table's chip is built with."""
    from ga2_cli import main
    assert main(["bus-width", "--widths", "4", "--ld-overlap", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "overlapped LDs" in first, first


def test_bus_width_builds_the_chip_asked_for(tmp_path, capsys):
    """`ga2 bus-width --chip fast` is the fast chip at its 4-byte width, overlapped LDs included (the chip's,
    unless --ld-overlap says otherwise): its B = 4 step is decode-table's for the chip, 1,056 cycles."""
    import json
    from ga2_sw.chips import chip
    from sim.decode_table import decode_table
    from ga2_cli import main
    out = tmp_path / "b.json"
    assert main(["bus-width", "--chip", "fast", "--widths", "4", "--json", str(out)]) == 0
    rows = [r for r in json.loads(out.read_text())["rows"] if r["name"] == "B=4 (all at token 16)"]
    want = [r for r in decode_table(chip("fast").config, "model")[0] if r["name"] == "B=4 (all at token 16)"]
    assert [r["cycles"] for r in rows] == [r["cycles"] for r in want] == [1056]
    assert main(["bus-width", "--chip", "fast", "--widths", "4", "--ld-overlap", "0", "--json", str(out)]) == 0
    assert [r["cycles"] for r in json.loads(out.read_text())["rows"] if r["name"] == "B=4 (all at token 16)"] != [1056]
