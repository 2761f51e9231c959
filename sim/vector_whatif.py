"""What-ifs on the decoupled chip's vector lane, on the cycle model: how many cycles the B = 4 decode step would
take if the requantiser or the softmax were faster. Nothing here is built; it says which vector-lane change is
worth building next (docs/ARCHITECTURE.md, "One sequence's tiles a row").

The cycle model (``ga2_sw.cycles``) is patched for the duration of one run, and the step is built under the
patch too, so the builder's list scheduler orders it for the faster lane, as it would for a chip that had it:

* ``rq_wide``: an RQ reads, requantises and writes that many elements a cycle: its busy time ``len + latency``
  becomes ``ceil(len / rq_wide) + latency``, and with ``rq_overlap`` the lane takes the next RQ after
  ``ceil(len / rq_wide)`` reads;
* ``sm_cycles``: the softmax takes that many cycles an element instead of three (its fixed overhead kept);
* ``sm_drain``: the vector lane takes the next instruction that many cycles before the softmax's last write.

Command line (``python -m sim.vector_whatif``): the table for the fastest 4-byte chip with MM's ``sa`` tiles
(``--bus-bytes 4 --sp-banks 32 --row-writes 1 --rq-overlap 1 --ld-overlap 1 --row-b 1``)."""

import dataclasses
from contextlib import contextmanager

from ga2_sw import cycles
from ga2_sw.config import Config
from ga2_sw.decode import beats_moved
from ga2_sw.isa import OPS, Op
from ga2_sw.workloads import decode_table_programs

__all__ = ["FASTEST", "WHAT_IFS", "patched", "step_cycles"]

FASTEST = Config(mode="decoupled", bus_bytes=4, sp_banks=32, row_writes=1, rq_overlap=1, ld_overlap=1, row_b=1)

# (label, patch arguments), in the table's order
WHAT_IFS = [
    ("as built", {}),
    ("softmax's divider drain overlapped (18 cycles)", {"sm_drain": 18}),
    ("RQ of 2 elements a cycle", {"rq_wide": 2}),
    ("RQ of 4 elements a cycle", {"rq_wide": 4}),
    ("softmax of 2 cycles an element", {"sm_cycles": 2}),
    ("softmax of 1 cycle an element", {"sm_cycles": 1}),
    ("softmax of 1 cycle an element, RQ of 4 elements", {"sm_cycles": 1, "rq_wide": 4}),
]


@contextmanager
def patched(rq_wide=1, sm_cycles=3, sm_drain=0):
    """The cycle model with a faster vector lane (the module docstring), restored on exit."""
    if rq_wide < 1 or not 1 <= sm_cycles <= 3 or sm_drain < 0:
        raise ValueError("rq_wide >= 1, sm_cycles in 1..3, sm_drain >= 0")
    rq, sm = OPS[Op.RQ], OPS[Op.SM]
    vector_issue = cycles.DecoupledTimer._vector_issue

    def reads(instr):
        return -(-instr.len // rq_wide)

    def issue(timer, index, instr, start):
        first_read = vector_issue(timer, index, instr, start)
        if instr.op == Op.RQ and timer.config.rq_overlap:
            timer.free["vector"] -= instr.len - reads(instr)
        if instr.op == Op.SM:
            timer.free["vector"] -= sm_drain
        return first_read

    OPS[Op.RQ] = dataclasses.replace(rq, busy=lambda i, c: rq.busy(i, c) - i.len + reads(i))
    OPS[Op.SM] = dataclasses.replace(sm, busy=lambda i, c: sm.busy(i, c) - (3 - sm_cycles) * i.len)
    cycles.DecoupledTimer._vector_issue = issue
    try:
        yield
    finally:
        OPS[Op.RQ], OPS[Op.SM] = rq, sm
        cycles.DecoupledTimer._vector_issue = vector_issue


def step_cycles(config=FASTEST, batch=4, **what_if):
    """(the cycle model's counters, the beats) of the decode table's step of ``batch`` sequences at ``max_ctx``
    tokens on ``config``, the step built and timed with the vector lane of ``what_if`` (``patched``)."""
    with patched(**what_if):
        step = decode_table_programs(config, batches=[batch])[0]
        return cycles.cycle_counts(step.program, config)[0], beats_moved(step.program, config)


def main():
    print(f"{'the B = 4 step at 4 bytes a beat, vector lane':52}  cycles  x beats  vector busy")
    for label, what_if in WHAT_IFS:
        c, beats = step_cycles(**what_if)
        print(f"{label:52}  {c.cycles:6,}  {c.cycles / beats:6.2f}x  {c.vec:11,}")


if __name__ == "__main__":
    main()
