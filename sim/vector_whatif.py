"""What-ifs on the decoupled chip's vector lane, on the cycle model: how many cycles the B = 4 decode step would
take if the softmax were faster, beside the lanes that are built (``Config.rq_lanes``, ``Config.sm_lanes``). The
patched what-ifs are not built; they say which vector-lane change is worth building next (docs/ARCHITECTURE.md, "A
wider requantiser").

The cycle model (``ga2_sw.cycles``) is patched for the duration of one run, and the step is built under the
patch too, so the builder's list scheduler orders it for the faster lane, as it would for a chip that had it:

* ``sm_cycles``: the softmax takes that many cycles an element instead of three (its fixed overhead kept; on a
  chip of one softmax lane);
* ``sm_drain``: the vector lane takes the next instruction that many cycles before the softmax's last write.

Command line (``python -m sim.vector_whatif``, no options): the table for the ``fast`` chip (``ga2_sw.chips``)
with one, two or four requantiser lanes, one or two softmax lanes."""

import sys
from contextlib import contextmanager
import dataclasses

from ga2_sw import cycles
from ga2_sw.decode import beats_moved
from ga2_sw.isa import OPS, Op
from ga2_sw.workloads import decode_table_programs
from ga2_sw.chips import chip

__all__ = ["FASTEST", "WHAT_IFS", "patched", "step_cycles", "main"]

# The fast chip on 32 banks with one requantiser lane and one softmax lane: the chip the what-ifs patch (the
# lane studies of docs/ARCHITECTURE.md; 32 banks do not route on the fast chip's 85F, docs/SYNTH.md).
FASTEST = chip("fast").config.replace(sp_banks=32, rq_lanes=1, sm_lanes=1)

# (label, the chip's changes, patch arguments), in the table's order
WHAT_IFS = [
    ("as built, one RQ lane", {}, {}),
    ("softmax's divider drain overlapped (18 cycles)", {}, {"sm_drain": 18}),
    ("RQ of 2 lanes (built: --rq-lanes 2)", {"rq_lanes": 2}, {}),
    ("RQ of 4 lanes (built: --rq-lanes 4)", {"rq_lanes": 4}, {}),
    ("softmax of 2 cycles an element", {}, {"sm_cycles": 2}),
    ("softmax of 1 cycle an element", {}, {"sm_cycles": 1}),
    ("RQ of 4 lanes, softmax of 2 lanes (built: --sm-lanes 2)", {"rq_lanes": 4, "sm_lanes": 2}, {}),
    ("RQ of 4 lanes, softmax of 1 cycle an element", {"rq_lanes": 4}, {"sm_cycles": 1}),
]


@contextmanager
def patched(sm_cycles=3, sm_drain=0):
    """The cycle model with a faster softmax (the module docstring), restored on exit."""
    if not 1 <= sm_cycles <= 3 or sm_drain < 0:
        raise ValueError("sm_cycles in 1..3, sm_drain >= 0")
    sm = OPS[Op.SM]
    vector_issue = cycles.DecoupledTimer._vector_issue

    def issue(timer, index, instr, start):
        first_read = vector_issue(timer, index, instr, start)
        if instr.op == Op.SM:
            timer.free["vector"] -= sm_drain
        return first_read

    OPS[Op.SM] = dataclasses.replace(sm, busy=lambda i, c: sm.busy(i, c) - (3 - sm_cycles) * i.len)
    cycles.DecoupledTimer._vector_issue = issue
    try:
        yield
    finally:
        OPS[Op.SM] = sm
        cycles.DecoupledTimer._vector_issue = vector_issue


def step_cycles(config=FASTEST, batch=4, **what_if):
    """(the cycle model's counters, the beats) of the decode table's step of ``batch`` sequences at ``max_ctx``
    tokens on ``config``, the step built and timed with the vector lane of ``what_if`` (``patched``)."""
    with patched(**what_if):
        step = decode_table_programs(config, batches=[batch])[0]
        return cycles.cycle_counts(step.program, config)[0], beats_moved(step.program, config)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if argv:
        print(f"python -m sim.vector_whatif: takes no arguments (the table's chip is fixed), not {argv[0]!r}",
              file=sys.stderr)
        return 2
    print(f"{'the B = 4 step at 4 bytes a beat, vector lane':56}  cycles  x beats  vector busy")
    for label, changes, what_if in WHAT_IFS:
        c, beats = step_cycles(FASTEST.replace(**changes), **what_if)
        print(f"{label:56}  {c.cycles:6,}  {c.cycles / beats:6.2f}x  {c.vec:11,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
