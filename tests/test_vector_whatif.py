"""sim.vector_whatif: the cycle model with a faster vector lane, worked by hand on single instructions, and the
model itself untouched outside the patch."""

import pytest

from ga2_sw import isa
from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.timing import rq_latency, sm_overhead
from ga2_sw.workloads import decode_table_programs
from sim.vector_whatif import FASTEST, patched, step_cycles

CHIP = Config(mode="decoupled", sp_banks=32, rq_overlap=1)
RQ = isa.rq(dst=200, src=100, len=16, m=3, s=2)
SM = isa.sm(dst=300, src=100, len=16)


def busy(instr, config=CHIP):
    return cycle_counts([instr, isa.halt()], config)[0].vec


def test_single_instructions_worked_by_hand():
    """An RQ of 16 at four elements a cycle is busy 4 + its latency; a softmax of 16 at one cycle an element 16 +
    its overhead; two RQs in a row start 4 reads apart instead of 16."""
    assert busy(RQ) == 16 + rq_latency(CHIP) and busy(SM) == 48 + sm_overhead(CHIP)
    with patched(rq_wide=4, sm_cycles=1):
        assert busy(RQ) == 4 + rq_latency(CHIP) and busy(SM) == 16 + sm_overhead(CHIP)
        two = [RQ, isa.rq(dst=400, src=500, len=16, m=3, s=2), isa.halt()]
        wide = cycle_counts(two, CHIP)[0].cycles
    assert cycle_counts(two, CHIP)[0].cycles - wide == 12 + 12      # each RQ's reads, 16 -> 4


def test_the_model_is_restored():
    """After the patch, and after an error inside it, the cycle model is the built chip's again."""
    before = busy(RQ), busy(SM)
    with pytest.raises(RuntimeError):
        with patched(rq_wide=4, sm_cycles=1, sm_drain=10):
            raise RuntimeError
    assert (busy(RQ), busy(SM)) == before
    with pytest.raises(ValueError):
        with patched(sm_cycles=0):
            pass


def test_the_step_as_built_is_the_decode_tables():
    """With no what-if the step is the decode table's B = 4 step on the fastest sa chip; an RQ of two elements
    a cycle takes it below 0.95 of that (972 -> 874 when this was written)."""
    built, beats = step_cycles()
    step = decode_table_programs(FASTEST, batches=[4])[0]
    assert built == cycle_counts(step.program, FASTEST)[0] and beats == 736
    assert step_cycles(rq_wide=2)[0].cycles < 0.95 * built.cycles
