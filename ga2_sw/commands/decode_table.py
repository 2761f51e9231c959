"""``ga2 decode-table``: the chapter's section-3 table (cycles, traffic, roofline) from a simulator's counters."""

import sys
import time

from ..analyses.common import table, write_json
from ..decode import traffic
from ..machine import Machine
from ..workloads import decode_table_programs

__all__ = ["register", "decode_table", "CHAPTER_CYCLES"]

# The chapter's chip on the same five programs (its printed table), the floor GA-2 must beat.
CHAPTER_CYCLES = {"B=1": 3827, "B=2": 5777, "B=3": 7727, "B=4": 9677, "ragged": 6452}


def _chapter_key(p):
    return "ragged" if "ragged" in p.name else f"B={p.batch}"


def decode_table(config, sim="model", seed=4242):
    """Rows of the decode table, one per program, from simulator ``sim``; every row is also checked
    against the reference machine (memory and counters) when ``sim`` is not the model itself."""
    from sim.backends import run_jobs
    programs = decode_table_programs(config, seed)
    t0 = time.perf_counter()
    results = run_jobs(sim, config, [(p.program, p.ext) for p in programs])
    seconds = time.perf_counter() - t0
    ref = Machine(config)
    rows = []
    for p, r in zip(programs, results):
        if not r.ok:
            raise RuntimeError(f"{p.name}: {sim} faulted with {r.error.name} at pc {r.pc}")
        expect = ref.run(p.program, p.ext)
        match = (r.counters == expect.counters and r.ext == expect.ext and r.sp == expect.sp)
        macs, words = traffic(p.program)
        c = r.counters
        rows.append({"name": p.name, "batch": p.batch, "lengths": list(p.lengths), "cycles": c.cycles,
                     "mm_cycles": c.mm, "dma_cycles": c.dma, "vec_cycles": c.vec, "instructions": c.instructions,
                     "macs": macs, "words": words, "matches_reference": match,
                     "chapter_cycles": CHAPTER_CYCLES.get(_chapter_key(p)) if config.rows == 4 and config.cols == 4
                     and config.max_ctx == 16 and config.d == 16 and config.d_model == 16 else None})
    return rows, seconds


def _print(rows, config, sim, seconds):
    peak = config.rows * config.cols
    body = []
    for r in rows:
        intensity = r["macs"] / r["words"]
        achieved = r["macs"] / r["cycles"]
        ceiling = min(peak, intensity)               # memory moves 1 word per cycle
        overlap = r["cycles"] / max(r["dma_cycles"], r["cycles"] - r["dma_cycles"])
        body.append([r["name"], r["cycles"], f"{r['cycles'] / r['batch']:,.0f}", r["macs"], r["words"],
                     f"{intensity:.2f}", f"{achieved:.3f}", f"{ceiling:.2f}", f"{100 * achieved / ceiling:.1f}%",
                     f"{100 * r['words'] / r['cycles']:.1f}%", f"{overlap:.2f}x",
                     "--" if r["chapter_cycles"] is None else f"{r['chapter_cycles']:,}",
                     "yes" if r["matches_reference"] else "NO"])
    print(f"decode steps on {sim} ({config.rows}x{config.cols} array, peak {peak} MAC/cycle, "
          f"memory 1 word/cycle, in-order mode)")
    print(table(["program", "cycles", "per token", "MACs", "words", "MAC/word", "achieved", "ceiling",
                 "of ceiling", "of mem bound", "if overlapped", "chapter", "= model"], body,
                ["<"] + [">"] * 12))
    total = sum(r["cycles"] for r in rows)
    words = sum(r["words"] for r in rows)
    chapter = [r["chapter_cycles"] for r in rows]
    line = f"total {total:,} cycles for {words:,} words moved ({100 * words / total:.1f}% of the memory bound)"
    if all(chapter):
        line += f"; the chapter's chip: {sum(chapter):,} cycles ({sum(chapter) / total:.2f}x slower)"
    print(line)
    print("('achieved' = MACs / cycles; 'ceiling' = min(peak, MAC/word x 1 word/cycle); 'of mem bound' = words / "
          "cycles; 'if overlapped' = cycles / max(DMA, non-DMA): the gain if loads ran under compute)")
    cps = total / seconds if seconds > 0 else float("inf")
    print(f"{sim}: {total:,} cycles simulated in {seconds:.2f} s of wall time, building and loading included "
          f"({cps:,.0f} cycles/s; `ga2 bench-sim` measures the simulation alone)", file=sys.stderr)


def _run(args):
    from ..cli import config_from_args
    from sim.backends import unavailable_reason
    config = config_from_args(args)
    sim = args.sim
    reason = unavailable_reason(sim)
    if sim == "verilator" and reason and not args.no_fallback:
        print(f"note: Verilator cannot run here ({reason}); running the same programs on pysim instead, "
              f"about a thousand times slower", file=sys.stderr)
        sim = "pysim"
    rows, seconds = decode_table(config, sim, args.seed)
    _print(rows, config, sim, seconds)
    if args.json:
        write_json(args.json, {"config": config.to_dict(), "sim": sim, "programs": rows})
    return 0 if all(r["matches_reference"] for r in rows) else 1


def register(sub):
    from ..cli import add_config_arguments
    from sim.backends import SIMULATORS
    p = sub.add_parser("decode-table", help="cycles, traffic and roofline of the chapter's decode steps")
    p.add_argument("--sim", choices=SIMULATORS, default="model", help="simulator (default %(default)s)")
    p.add_argument("--seed", type=int, default=4242, help="workload seed (default %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    p.add_argument("--no-fallback", action="store_true",
                   help="fail instead of falling back to pysim when Verilator cannot run")
    add_config_arguments(p)
    p.set_defaults(func=_run)
