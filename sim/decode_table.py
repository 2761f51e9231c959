"""The decode-table programs (``ga2_sw.workloads.decode_table_programs``) on any simulator, each checked against
the reference machine: the rows of ``ga2 decode-table`` and of the chips' datasheets (``python -m synth
datasheet``)."""

import time

from ga2_sw.decode import beats_moved, traffic
from ga2_sw.dram import GRADES, peak_bytes_per_cycle
from ga2_sw.machine import Machine
from ga2_sw.packing import beat_bytes, element_bytes
from ga2_sw.workloads import decode_table_count, decode_table_programs

from .backends import DEFAULT_CYCLE_LIMIT, get_backend
from .compare import compare_results
from .jobs import as_job

__all__ = ["decode_table", "table_runs", "CHAPTER_CYCLES"]

# The chapter's chip on the same five programs (its printed table), the floor GA-2 must beat.
CHAPTER_CYCLES = {"B=1": 3827, "B=2": 5777, "B=3": 7727, "B=4": 9677, "ragged": 6452}


def table_runs(config, lengths=None):
    """The ``progress()`` calls ``decode_table`` makes: three per program (``decode_table_count``: B = 1 .. rows
    and the ragged batch, or the one batch of ``lengths``)."""
    return 3 * decode_table_count(config, lengths=lengths)


def _chapter_key(p):
    return "ragged" if "ragged" in p.name else f"B={p.batch}"


def decode_table(config, sim="model", seed=4242, lengths=None, key_digits=1, progress=None):
    """Rows of the decode table, one per program, from simulator ``sim`` (a ``sim.backends`` name); every row
    is also checked against the reference machine (memories, counters, error and pc). ``lengths``: one batch
    of those lengths instead of the five programs; ``key_digits`` 2: wide keys (the long-context steps).
    ``progress()`` is called as each program is built, once it has run on the reference machine and once it
    has run on ``sim``: ``3 x programs`` calls (``table_runs``), each program of a long context taking
    seconds."""
    tick = progress or (lambda: None)
    programs = decode_table_programs(config, seed, lengths=lengths, key_digits=key_digits, progress=tick)
    machine = Machine(config)
    refs = []
    for p in programs:
        refs.append(machine.run(p.program, p.ext))
        tick()
    # Long-context steps run for millions of cycles: the limit is the reference's count with a margin.
    limit = max([DEFAULT_CYCLE_LIMIT] + [r.counters.cycles + 10_000 for r in refs])
    t0 = time.perf_counter()
    results = []
    with get_backend(sim).open(config) as session:              # one build and session for every program
        for p in programs:
            results += session.run_many([as_job((p.program, p.ext), limit)])
            tick()
    seconds = time.perf_counter() - t0
    rows = []
    for p, want, r in zip(programs, refs, results):
        if not r.ok:
            raise RuntimeError(f"{p.name}: {sim} faulted with {r.error.name} at pc {r.pc}")
        match = not compare_results(want, r)
        macs, words = traffic(p.program)
        moved = beats_moved(p.program, config)
        c = r.counters
        rows.append({"name": p.name, "mode": config.mode.value, "batch": p.batch, "lengths": list(p.lengths), "cycles": c.cycles,
                     "mm_cycles": c.mm, "dma_cycles": c.dma, "vec_cycles": c.vec, "instructions": c.instructions,
                     "macs": macs, "words": words, "beats": moved, "bytes": words * element_bytes(config),
                     "bus_bytes": config.bus_bytes, "memory_bound": moved,
                     "of_memory_bound": round(moved / c.cycles, 4), "matches_reference": match,
                     "memory": config.memory, "stall_cycles": c.stall, "key_digits": key_digits,
                     **({"dram_bandwidth_fraction": round(moved * beat_bytes(config) / (c.cycles * peak_bytes_per_cycle(
                         GRADES[config.memory], config.clock_mhz)), 4)} if config.memory != "ideal" else {}),
                     "chapter_cycles": CHAPTER_CYCLES.get(_chapter_key(p)) if lengths is None and config.rows == 4
                     and config.cols == 4 and config.max_ctx == 16 and config.d == 16 and config.d_model == 16
                     else None})
    return rows, seconds
