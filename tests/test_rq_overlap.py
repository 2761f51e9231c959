"""Overlapped requantisations (Config.rq_overlap, docs/ARCHITECTURE.md): an RQ starts beside the RQ before it while
that one still writes. The rule's arithmetic against a cycle-by-cycle walk of every bank access, a timeline
worked by hand, pysim (which watches every bank for two accesses in one cycle) against the model on programs that
take every branch of the rule, and what the option does to the decode step."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from ga2_sw import isa
from ga2_sw.banking import (RQ_FOLLOW_MAX_WAIT, RQ_READ_TO_WRITE, bank_of, rq_follow_wait, rq_write_skew,
                            rq_write_track)
from ga2_sw.config import Config
from ga2_sw.cycles import DecoupledTimer, conflict, cycle_counts, lane_of
from ga2_sw.isa import Op
from ga2_sw.machine import Machine
from ga2_sw.workloads import decode_table_programs
from sim.pysim_runner import run_pysim
from sim.random_programs import FUZZ_CONFIG, fuzz_job, random_words

OVERLAP = Config(mode="decoupled", rq_overlap=1)
FIRST = isa.rq(dst=500, src=1, len=10, m=3, s=2)
SECOND = isa.rq(dst=600, src=40, len=12, m=-7, s=5)


def bank_accesses(rq, first_read, config):
    """{cycle: [bank, ...]} of an RQ's reads and writes as they reach the banks, walked element by element: element
    t read in ``first_read + t // rq_lanes`` (one lane: ``first_read + t``) and written ``RQ_READ_TO_WRITE + skew``
    cycles after its read reaches the bank (both counted from the request, which shifts every access alike)."""
    lag = RQ_READ_TO_WRITE + rq_write_skew(rq, config)
    out = {}
    for t in range(rq.len):
        cycle = first_read + t // config.rq_lanes
        out.setdefault(cycle, []).append(bank_of(rq.src + t, config))
        out.setdefault(cycle + lag, []).append(bank_of(rq.dst + t, config))
    return out


def rq_fields(draw, config):
    length = draw(st.integers(1, 40))
    src = draw(st.integers(0, config.sp_words - length))
    if draw(st.booleans()):
        dst = src                                                   # in place
    else:
        dst = draw(st.integers(0, config.sp_words - length))
        if dst < src + length and src < dst + length:               # the checker's OVERLAP: disjoint or equal
            dst = (src + length) % (config.sp_words - length)
            if dst < src + length and src < dst + length:
                dst = src
    return isa.rq(dst=dst, src=src, len=length, m=1, s=0)


@st.composite
def following_pairs(draw):
    banks = draw(st.sampled_from((4, 8, 16, 32, 64)))
    config = Config(mode="decoupled", sp_banks=banks, sp_words=4096, rq_overlap=1)
    first, second = rq_fields(draw, config), rq_fields(draw, config)
    first_read = 1 + draw(st.integers(0, 5))
    end = first_read - 1 + first.len + RQ_READ_TO_WRITE + rq_write_skew(first, config)   # its last write, roughly
    start = draw(st.integers(first_read + first.len, max(first_read + first.len, end)))
    return config, first, second, first_read, start


@settings(max_examples=400, deadline=None, derandomize=True)
@given(following_pairs())
def test_a_following_rq_never_meets_the_one_before_on_a_bank(case):
    """Whatever the two RQs and however late the second starts after the first's last read, the wait that
    rq_follow_wait chooses (at most RQ_FOLLOW_MAX_WAIT) leaves no cycle with two accesses on one bank, walking
    every read and write of both (not the rule's algebra); and the second's words reach the pipeline after the
    first's, so their writes never share a cycle either."""
    config, first, second, first_read, start = case
    wait = rq_follow_wait(second, rq_write_track(first, first_read, config), start, config)
    assert 0 <= wait <= RQ_FOLLOW_MAX_WAIT
    second_read = start + 2 + wait
    both = bank_accesses(first, first_read, config)
    for cycle, banks in bank_accesses(second, second_read, config).items():
        both.setdefault(cycle, []).extend(banks)
    assert all(len(banks) == len(set(banks)) for banks in both.values())
    entered = lambda rq, read, t: read + t + rq_write_skew(rq, config)     # noqa: E731 (the word's entry)
    assert entered(second, second_read, 0) > entered(first, first_read, first.len - 1)


def test_the_wait_is_needed_where_it_is_taken():
    """The hand-worked pair below: reading two cycles sooner or one cycle sooner, the second RQ's reads would meet
    the first's writes (so the rule is not only cautious)."""
    track = rq_write_track(FIRST, 3, OVERLAP)
    assert rq_follow_wait(SECOND, track, 13, OVERLAP) == 2
    for early in (15, 16):
        both = bank_accesses(FIRST, 3, OVERLAP)
        clash = any(bank in both.get(cycle, []) for cycle, banks in bank_accesses(SECOND, early, OVERLAP).items()
                    for bank in banks if cycle < 17 + SECOND.len)
        assert clash, early


def test_two_rqs_worked_by_hand():
    """On 8 banks, from docs/ISA.md and docs/ARCHITECTURE.md. RQ 500 <- 1 (10 words) starts in cycle 2 and reads
    in 3..12; bank(x) and bank(x - 490) may meet (1 - 500 + 9 = -490), so its skew is 1 and its last write is in
    2 + 10 + 9 + 1 = 22. RQ 600 <- 40 (12 words), decoded in 3, would wait for cycle 23 without the option; with it
    the lane takes it in 13, the cycle after the first's last read, beside the first's writes. It decides in 14:
    read from 15, its word 40 + j would meet the first's write of 502 + j (42 and 504 are both on bank 7); from
    16, of 503 + j (40 and 503 on bank 5); from 17, of 504 + j, never. So it reads in 17..28 with skew 0 and
    writes its last word in 17 + 11 + 9 = 37. The vector lane is busy or draining in 3..37: 35 cycles; the
    HALT is checked in 38, done in 39."""
    timer = DecoupledTimer(OVERLAP)
    assert timer.issue(FIRST) == 2 and timer.starts[0][2] == 22
    assert timer.issue(SECOND) == 13 and timer.starts[1][2] == 37
    counters = cycle_counts([FIRST, SECOND, isa.halt()], OVERLAP)[0]
    assert (counters.cycles, counters.vec, counters.instructions) == (39, 35, 3)
    alone = DecoupledTimer(OVERLAP.replace(rq_overlap=0))
    alone.issue(FIRST)
    assert alone.issue(SECOND) == 23


def test_what_waits_for_a_draining_rq():
    """Without the option nothing starts on the vector lane before the RQ's last write; with it only the next RQ
    does: an SM waits for the last write (its requests would meet the RQ's writes on port B), and so does an RQ
    that reads the words the one before writes (the scoreboard), and an MM or an ST that reads them while a
    second RQ runs (the scoreboard's second vector entry)."""
    def starts(program):
        timer = DecoupledTimer(OVERLAP)
        return [timer.issue(i) for i in program]
    assert starts([FIRST, isa.sm(700, 18, 12)]) == [2, 23]
    assert starts([FIRST, isa.rq(dst=600, src=500, len=10, m=2, s=1)]) == [2, 23]       # reads what it writes
    # the ST of the first RQ's words waits for its last write (22), though the second RQ has started in 13
    assert starts([FIRST, SECOND, isa.st(src=500, dst=0, len=10)]) == [2, 13, 23]


def hang_limit(ref):
    """A cycle limit that turns a hang (a write count that never reaches zero) into a failure within seconds."""
    return 4 * ref.counters.cycles + 256


PROGRAMS = {
    "the hand-worked pair": [FIRST, SECOND, isa.halt()],
    "three, a short one between": [FIRST, isa.rq(dst=520, src=60, len=1, m=9, s=1), SECOND, isa.sm(700, 18, 12),
                                   isa.halt()],
    "in place, then skews of 1, 2 and 0": [isa.rq(dst=100, src=100, len=20, m=300, s=9),
                                           isa.rq(dst=203, src=130, len=7, m=2, s=0),
                                           isa.rq(dst=300, src=134, len=9, m=-300, s=12),
                                           isa.rq(dst=400, src=331, len=5, m=5, s=3), isa.halt()],
    "a chain the scoreboard holds": [FIRST, isa.rq(dst=600, src=500, len=10, m=2, s=1),
                                     isa.mm(900, 600, 20, 2, 4, 3, lda=4, ldb=3, ldc=3), isa.halt()],
    "loads, stores and MMs beside": [isa.ld(dst=0, src=0, len=40), FIRST, SECOND,
                                     isa.mm(900, 500, 20, 2, 4, 3, lda=4, ldb=3, ldc=3), isa.st(src=600, dst=60, len=12),
                                     isa.rq(dst=620, src=700, len=16, m=4, s=2), isa.halt()],
}


def run_against_the_model(config, program, name):
    """Memories and all six counters of ``program`` (random images seeded by ``name``) on pysim and the reference
    machine; pysim also fails the run if any bank sees two accesses in one cycle. Returns pysim's result."""
    rng = random.Random(name)
    ext, sp = random_words(rng, 200), random_words(rng, 1000)
    ref = Machine(config).run(program, ext, sp)
    got = run_pysim(config, program, ext, sp, cycle_limit=hang_limit(ref))
    assert ref.ok and (got.counters, got.error, got.pc) == (ref.counters, ref.error, ref.pc)
    assert got.sp == ref.sp and got.ext == ref.ext
    return got


@pytest.mark.parametrize("name", PROGRAMS)
def test_pysim_matches_the_model(name):
    run_against_the_model(OVERLAP, PROGRAMS[name], name)


def check_random_programs_with_waits(config, count):
    """``count`` random programs (no faults) in which a following RQ waits, on pysim against the reference
    machine: with a wrong wait the banks would see two accesses in one cycle and the run fails."""
    picked, seed = [], 0
    while len(picked) < count:
        program, ext, sp = fuzz_job(config, seed, fault_rate=0.0)
        seed += 1
        timer, waited = DecoupledTimer(config), False
        for instr in program[:-1]:
            before, start = timer._last_rq, timer.issue(instr)
            if instr.op == Op.RQ and before is not None and before[1] >= start:
                waited |= rq_follow_wait(instr, before[0], start, config) > 0
        if waited:
            picked.append((program, ext, sp))
    for program, ext, sp in picked:
        ref = Machine(config).run(program, ext, sp)
        got = run_pysim(config, program, ext, sp, cycle_limit=hang_limit(ref))
        assert (got.counters, got.error, got.pc, got.sp, got.ext) == (ref.counters, ref.error, ref.pc, ref.sp, ref.ext)


def test_random_programs_with_waits_on_pysim():
    """Random programs in which a following RQ waits one or two cycles, on pysim."""
    check_random_programs_with_waits(FUZZ_CONFIG.replace(mode="decoupled", rq_overlap=1), 4)


def test_the_fuzz_generator_exercises_the_rule():
    """The strength of the random programs the Verilator tests run on the option, measured on the model: RQs
    that start beside a draining RQ with each of the three waits, and instructions held back by the RQ before
    the vector lane's last (the scoreboard's second vector entry)."""
    config = FUZZ_CONFIG.replace(mode="decoupled", rq_overlap=1)
    waits, held = {0: 0, 1: 0, 2: 0}, 0
    for seed in range(400):
        program, _, _ = fuzz_job(config, seed, fault_rate=0.0)
        timer, vector = DecoupledTimer(config), []
        for instr in program[:-1]:
            ready, before = timer.lane_ready(instr), timer._last_rq
            older = [other for other, _, end in timer.in_flight(ready)
                     if other.op == Op.RQ and vector and other is not vector[-1] and conflict(instr, other)]
            start = timer.issue(instr)
            held += bool(older)
            if instr.op == Op.RQ and before is not None and before[1] >= start:
                waits[rq_follow_wait(instr, before[0], start, config)] += 1
            if lane_of(instr.op) == "vector":
                vector.append(instr)
    assert min(waits.values()) >= 10 and held >= 5, (waits, held)


def test_the_decode_step_gains_where_the_vector_lane_binds():
    """The B = 4 step at 4 bytes a beat on 32 banks, bound by the lanes, not the port: overlapped RQs take the
    vector lane's busy time down and the step with it; at 1 byte a beat (port-bound) no step is slower."""
    for bus, banks in ((4, 32), (1, 8)):
        base = Config(mode="decoupled", bus_bytes=bus, sp_banks=banks)
        plain = [cycle_counts(p.program, base)[0] for p in decode_table_programs(base)]
        overlap = [cycle_counts(p.program, base.replace(rq_overlap=1))[0]
                   for p in decode_table_programs(base.replace(rq_overlap=1))]
        assert all(o.cycles <= p.cycles and o.vec <= p.vec for o, p in zip(overlap, plain)), (bus, plain, overlap)
        if bus == 4:        # (1,282 -> 1,221 cycles, the vector lane busy 901 -> 792)
            assert overlap[3].cycles < 0.97 * plain[3].cycles and overlap[3].vec < 0.9 * plain[3].vec, \
                (plain[3], overlap[3])


def test_config_rules(capsys):
    """The option needs the decoupled chip; the command line says so in one line (exit status 2)."""
    from ga2_cli import main
    with pytest.raises(ValueError, match="'rq_overlap' must be 0 in inorder mode"):
        Config(rq_overlap=1)
    assert main(["decode-table", "--mode", "inorder", "--rq-overlap", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "rq_overlap" in err and len(err.splitlines()) == 1, err
    assert main(["decode-table", "--mode", "decoupled", "--rq-overlap", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "rq-overlap" in err.replace("_", "-") and "0..1" in err, err


def test_bus_width_says_which_chip(capsys):
    """`ga2 bus-width` names the options the table's chip is built with."""
    from ga2_cli import main
    assert main(["bus-width", "--widths", "4", "--rq-overlap", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "8 banks, overlapped RQs," in first and "a row of results" not in first, first
