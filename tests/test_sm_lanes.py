"""The softmax of two lanes (Config.sm_lanes, docs/ARCHITECTURE.md "A wider requantiser" and "... and a softmax of
two lanes"): its max and exp passes read two scores a cycle. The unit's values and port schedule are
tests/test_hdl_softmax.py's; here the whole chip on pysim against the model (the lanes share the vector lane's
port-B groups with the requantiser's), the cycle model's port schedule worked by hand, the decode step, and the
configuration rules."""

import random

import pytest

from ga2_sw import isa
from ga2_sw.banking import bank_of
from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts, vector_port_b
from ga2_sw.decode import beats_moved
from ga2_sw.machine import Machine
from ga2_sw.workloads import decode_table_programs
from sim.pysim_runner import run_pysim
from sim.random_programs import random_words
from ga2_sw.chips import chip

PROGRAMS = {
    "one of 12": [isa.sm(700, 18, 12), isa.halt()],
    "odd, one, two, the longest over its source": [isa.sm(700, 18, 13), isa.sm(800, 100, 1), isa.sm(900, 200, 2),
                                                   isa.sm(300, 300, 64), isa.halt()],
    "beside loads, RQs and MMs": [isa.ld(0, 0, 40), isa.sm(700, 0, 33), isa.rq(dst=500, src=1, len=10, m=3, s=2),
                                  isa.mm(900, 500, 20, 2, 4, 3, lda=4, ldb=3, ldc=3), isa.sm(800, 700, 7), isa.halt()],
}


# Every program on two RQ lanes over 8 banks; on the other two chips the default tier runs the crowded program,
# the slow tier all three.
CHIPS = [(8, 1), (8, 2), (32, 4)]
CASES = [pytest.param(name, banks, rq_lanes, id=f"{name}-{banks}-{rq_lanes}",
                      marks=[] if (banks, rq_lanes) == (8, 2) or name == "beside loads, RQs and MMs"
                      else [pytest.mark.slow])
         for banks, rq_lanes in CHIPS for name in PROGRAMS]


@pytest.mark.parametrize("name, banks, rq_lanes", CASES)
def test_pysim_matches_the_model(name, banks, rq_lanes):
    """Memories and all six counters, scores spread over the int8 range; pysim also fails the run if any bank
    sees two accesses in one cycle. With RQ lanes too, the two units' second lanes share group vector1."""
    config = Config(mode="decoupled", sp_banks=banks, sm_lanes=2, rq_overlap=1, rq_lanes=rq_lanes)
    rng = random.Random(name)
    ext = random_words(rng, 200)
    sp = [rng.randrange(-128, 128) & 0xFFFFFFFF for _ in range(1000)]
    ref = Machine(config).run(PROGRAMS[name], ext, sp)
    got = run_pysim(config, PROGRAMS[name], ext, sp, cycle_limit=4 * ref.counters.cycles + 256)
    assert ref.ok and (got.counters, got.error, got.pc) == (ref.counters, ref.error, ref.pc)
    assert got.sp == ref.sp and got.ext == ref.ext


def test_the_port_schedule_worked_by_hand():
    """SM 40 <- 7, 5 scores, started in cycle 0 on 8 banks: its pairs are requested in 1, 2, 3 and again in 4, 5,
    6, its quotients in 2*3 + 1 + 25 = 32 .. 36; each request takes its bank a cycle later (the announce
    register). Words 7, 8 are banks 7 and 1 (8 = row 1: (8 + 1) mod 8)."""
    config = Config(mode="decoupled", sm_lanes=2)
    taken = vector_port_b(isa.sm(40, 7, 5), 0, config)
    pairs = [{bank_of(a, config) for a in (7 + 2 * p, 7 + 2 * p + 1) if a < 12} for p in range(3)]
    want = {1 + p + 1: pairs[p] for p in range(3)} | {4 + p + 1: pairs[p] for p in range(3)}
    want |= {32 + i + 1: {bank_of(40 + i, config)} for i in range(5)}
    assert taken == want and pairs[0] == {7, 1}
    assert cycle_counts([isa.sm(40, 7, 5), isa.halt()], config)[0].vec == 36


# The lane studies' chip: the fast chip on 32 banks, with four RQ lanes and one softmax lane.
FASTEST = chip("fast").config.replace(sp_banks=32, rq_lanes=4, sm_lanes=1)


def test_the_decode_step_gains():
    """With four RQ lanes a softmax of two lanes takes the B = 4 step at 4 bytes a beat from 840 to 807 cycles
    (1.10 x its 736 beats), and no decode step is slower."""
    steps = {lanes: [(cycle_counts(p.program, FASTEST.replace(sm_lanes=lanes))[0].cycles,
                      beats_moved(p.program, FASTEST))
                     for p in decode_table_programs(FASTEST.replace(sm_lanes=lanes))]
             for lanes in (1, 2)}
    assert steps[1][3] == (840, 736) and steps[2][3] == (807, 736), steps
    assert all(two[0] <= one[0] for one, two in zip(steps[1], steps[2])), steps


def test_config_rules(capsys):
    """Two lanes need the decoupled chip's banks; the command line says so in one line (exit status 2)."""
    from ga2_cli import main
    with pytest.raises(ValueError, match="'sm_lanes' must be 1 in inorder mode"):
        Config(sm_lanes=2)
    assert main(["decode-table", "--mode", "inorder", "--sm-lanes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "sm_lanes" in err and len(err.splitlines()) == 1, err
    assert main(["decode-table", "--mode", "decoupled", "--sm-lanes", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert "sm-lanes" in err.replace("_", "-") and "1..2" in err, err
