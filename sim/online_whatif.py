"""What-if on the online unit (SMC, RSA, NRM), on the cycle model: how many cycles SmolLM2's decode step would take
on the ``llm`` chip if the unit made two scratchpad accesses a cycle instead of one. The unit is not built that
way; the what-if says what building it would buy, row by row of ``ga2 llm throughput`` (docs/LLM.md, "Next").

The patch, for the duration of one run: each online instruction's reads go two a cycle from its first read's
cycle, then its writes two a cycle, the gap between its last read and its first write (its pipeline's depth)
kept; its busy time ends with its last write, and the matrix unit gives way to both of a cycle's requests as it
does to one (``cycles.vector_port_b``). Two requests of one cycle on one bank are not modelled: a unit built
this way would need its builders to keep them apart. The step's programs are built and list-scheduled under
the patch, as they would be for a chip that had the unit.

Command line: ``python -m sim.online_whatif [--batches 1,2,4,8] [--contexts 64,1024]``: per batch and context,
the step's cycles and fraction of its bound as built and with the patch."""

import dataclasses
import sys
from contextlib import contextmanager

from ga2_sw import cycles
from ga2_sw.analyses.common import table
from ga2_sw.isa import ONLINE_OPS, OPS
from ga2_sw.llm import whole_step

from .step_whatif import compare, parser

__all__ = ["patched", "rows", "main"]


@contextmanager
def patched(accesses=2):
    """The cycle model with an online unit of ``accesses`` scratchpad accesses a cycle (the module docstring),
    restored on exit."""
    if accesses not in (1, 2):
        raise ValueError(f"the online unit's accesses a cycle are 1 or 2, not {accesses!r}")
    built = cycles.online_requests
    specs = {op: OPS[op] for op in ONLINE_OPS}

    def requests(instr, config):
        patch, OPS[instr.op] = OPS[instr.op], specs[instr.op]      # the built schedule checks the built busy time
        try:
            as_built = built(instr, config)
        finally:
            OPS[instr.op] = patch
        reads = [addr for _, addr, kind in as_built if kind == "r"]
        writes = [addr for _, addr, kind in as_built if kind == "w"]
        first_read = as_built[0][0]
        depth = next(c for c, _, kind in as_built if kind == "w") - as_built[len(reads) - 1][0]
        last_read = first_read + (len(reads) - 1) // accesses
        return ([(first_read + k // accesses, addr, "r") for k, addr in enumerate(reads)] +
                [(last_read + depth + k // accesses, addr, "w") for k, addr in enumerate(writes)])

    for op, spec in specs.items():
        OPS[op] = dataclasses.replace(spec, busy=lambda i, config: requests(i, config)[-1][0])
    cycles.online_requests = requests
    whole_step.clear_caches()      # the step's cached programs and counters are the patch's
    try:
        yield
    finally:
        OPS.update(specs)
        cycles.online_requests = built
        whole_step.clear_caches()


def rows(batches, contexts, accesses=2, config=None):
    """``ga2 llm throughput``'s rows on ``config`` (the llm chip) as built and with the online unit of
    ``accesses`` a cycle: ``[(as built, patched)]``."""
    return compare(patched(accesses), batches, contexts, config)


def main(argv=None):
    args = parser("python -m sim.online_whatif", __doc__).parse_args(argv)
    print("SmolLM2-135M's decode step on the llm chip (ga2 llm throughput's numerics), its online unit as built (one "
          "scratchpad access a cycle) and with two (a what-if on the cycle model); the attention's chip cycles, and "
          "with two accesses its matrix unit's and vector lane's busy cycles")
    head = ["batch", "context", "cycles", "of bound", "two accesses", "of bound", "attention", "two accesses",
            "matrix busy", "vector busy"]
    body = []
    for built, faster in rows(args.batches, args.contexts):
        attention = faster["phases"]["attention"]
        body.append([built["batch"], f"{built['context']:,}", f"{built['cycles']:,}",
                     f"{built['fraction_of_bound']:.1%}", f"{faster['cycles']:,}", f"{faster['fraction_of_bound']:.1%}",
                     f"{built['phases']['attention']['chip']:,}", f"{attention['chip']:,}",
                     f"{attention['matrix']:,}", f"{attention['vector']:,}"])
    print(table(head, body, [">"] * len(head)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
