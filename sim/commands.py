"""``ga2 bench-sim``, ``ga2 fuzz`` and ``ga2 cache``: simulator speed on the decode-table programs,
differential fuzzing of the RTL (Verilator or Icarus) against the reference machine, and the on-disk caches
(where each is, how large, and clearing them). The simulators come from ``sim.backends``, the fuzz programs
from ``sim.random_programs``, the caches from ``sim.cache``."""

import sys
import time

from ga2_sw.cycles import cycle_counts
from ga2_sw.machine import Machine

from ga2_sw.options import SEED, Float, Int, Names

from . import cache as caches
from .backends import backend_names, get_backend
from .compare import compare_results, format_program
from .random_programs import cycle_limit_for, fuzz_job
from .jobs import BATCH_WORDS, batch_for

__all__ = ["register", "bench_sim", "fuzz", "cache_report"]


# -- ga2 bench-sim -----------------------------------------------------------------------------------------

def bench_sim(config, sims=("pysim", "verilator"), seed=4242, repeat=20, pysim_repeat=1):
    """Run the decode-table programs on each simulator; a dict per simulator with the simulated cycles of one
    pass over the programs and its speed in cycles per second, measured three ways: ``mean`` (wall time of
    the simulated cycles, all runs), ``best`` (the fastest run of each program, wall), ``best_cpu`` (the
    same in process CPU time: least disturbed by other jobs on the machine). Also the end-to-end wall time
    (process start, loading, read-back, parsing) and whether every run matched the reference machine.
    Speed-ups over pysim are taken on ``best_cpu``."""
    from ga2_sw.workloads import decode_table_programs
    programs = decode_table_programs(config, seed)
    ref = Machine(config)
    expected = [ref.run(p.program, p.ext) for p in programs]
    report = {"config": config.to_dict(), "programs": [p.name for p in programs], "sims": {}}
    for name in sims:
        entry = {"name": name}
        reps = pysim_repeat if name == "pysim" else repeat if name == "verilator" else 1
        runs = programs * reps
        with get_backend(name).open(config) as sim:
            if sim.build_time is not None:
                entry.update(build_seconds=round(sim.build_time, 2), cached=sim.cached,
                             load_seconds=round(sim.load_time, 3))
            t0 = time.perf_counter()
            results = sim.run_many([(p.program, p.ext) for p in runs])
            wall = time.perf_counter() - t0
        n = len(programs)
        per_program = [results[i::n] for i in range(n)]
        cycles = sum(rs[0].sim_cycles for rs in per_program)              # one pass
        best = sum(min(r.seconds for r in rs) for rs in per_program)
        best_cpu = sum(min(r.cpu_seconds for r in rs) for rs in per_program)
        mean = sum(r.seconds for r in results) / reps
        entry.update(runs=len(results), chip_cycles=sum(r.counters.cycles for r in results[:n]), sim_cycles=cycles,
                     cycles_per_second={"mean": cycles / mean if mean else None, "best": cycles / best if best else None,
                                        "best_cpu": cycles / best_cpu if best_cpu else None},
                     wall_seconds=wall, wall_cycles_per_second=cycles * reps / wall if wall else None,
                     matches_reference=all(not compare_results(e, r, check_sp=r.sp is not None)
                                           for e, r in zip(expected * reps, results)))
        report["sims"][name] = entry
    base = report["sims"].get("pysim", {}).get("cycles_per_second", {}).get("best_cpu")
    for entry in report["sims"].values():
        v = entry["cycles_per_second"]["best_cpu"]
        entry["speedup_vs_pysim"] = v / base if base and v else None
    return report


def _print_bench(report):
    from ga2_sw.analyses.common import table

    def rate(v):
        return "--" if v is None else f"{v:,.0f}"
    rows = []
    for name, e in report["sims"].items():
        c = e["cycles_per_second"]
        rows.append([name, e["runs"], e["sim_cycles"], rate(c["mean"]), rate(c["best"]), rate(c["best_cpu"]),
                     "--" if e["speedup_vs_pysim"] is None else f"{e['speedup_vs_pysim']:,.0f}x",
                     rate(e["wall_cycles_per_second"]), "yes" if e["matches_reference"] else "NO"])
    print(f"decode-table programs ({', '.join(report['programs'])}) on a {report['config']['rows']}x"
          f"{report['config']['cols']} chip")
    print(table(["simulator", "runs", "cycles/pass", "cycles/s mean", "best", "best CPU", "vs pysim (best CPU)",
                 "end-to-end", "= model"], rows, ["<"] + [">"] * 8))
    print("(cycles/s over the simulated clock cycles, start to done: 'mean' of all runs in wall time; 'best' the "
          "fastest run of each program; 'best CPU' the same in process CPU time, the figure least disturbed by "
          "other jobs; 'end-to-end' also counts process start, memory loading and read-back, and parsing)")
    for name, e in report["sims"].items():
        if "build_seconds" in e:
            print(f"{name} build: {e['build_seconds']:.1f} s ({'cached' if e['cached'] else 'built now'}); "
                  f"this load {e['load_seconds']:.2f} s")


def _check_bench_sim(args):
    for s in args.sims:
        get_backend(s).require()                 # a simulator that cannot run here: exit status 4, now


def _bench_sim(args):
    from ga2_sw.cli import config_from_args
    from ga2_sw.analyses.common import write_json
    config = config_from_args(args)
    sims = list(args.sims)
    report = bench_sim(config, sims, seed=args.seed, repeat=args.repeat, pysim_repeat=args.pysim_repeat)
    _print_bench(report)
    if args.json:
        write_json(args.json, report)
    return 0 if all(e["matches_reference"] for e in report["sims"].values()) else 1


# -- ga2 fuzz ----------------------------------------------------------------------------------------------

def fuzz(config, count, seed, sim_name="verilator", batch=None, progress=True, out=sys.stdout, fault_rate=0.3,
         start=0):
    """Differential fuzzing; returns (programs run, seconds, first failure or None). Case i uses the seed
    ``seed * 1_000_003 + i`` (i from ``start``), so one failing case can be replayed alone. ``batch`` programs
    go to one simulator process (default ``sim.jobs.batch_for(config)``: 200, fewer on large memories)."""
    from tqdm import tqdm
    batch = batch_for(config) if batch is None else batch
    if not (isinstance(count, int) and count >= 1 and isinstance(batch, int) and batch >= 1):
        raise ValueError(f"fuzz: count and batch must be at least 1, not {count!r} and {batch!r}")
    sim = get_backend(sim_name).open(config)
    if sim.build_time is not None:
        print(f"{sim_name}: build {sim.build_time:.1f} s ({'cached' if sim.cached else 'built now'})", file=out)
    machine = Machine(config)
    done, failure = 0, None
    t0 = time.perf_counter()
    bar = tqdm(total=count, unit="prog", disable=not progress, file=sys.stderr)
    try:
        while done < count and failure is None:
            n = min(batch, count - done)
            cases = []
            for i in range(start + done, start + done + n):
                case_seed = seed * 1_000_003 + i
                program, ext, sp = fuzz_job(config, case_seed, fault_rate)
                cases.append((i, case_seed, program, ext, sp))
            results = sim.run_many([(c[2], c[3], c[4], cycle_limit_for(c[2], config)) for c in cases], on_hang="return")
            for (i, case_seed, program, ext, sp), got in zip(cases, results):
                ref = machine.run(program, ext, sp)
                diffs = compare_results(ref, got)
                model, err, pc = cycle_counts(program, config)
                if (model, err, pc) != (ref.counters, ref.error, ref.pc):
                    diffs.append(f"cycle model: {model} {err.name} pc {pc}; reference machine {ref.counters} "
                                 f"{ref.error.name} pc {ref.pc}")
                if diffs:
                    failure = {"index": i, "seed": case_seed, "program": program, "diffs": diffs, "ref": ref, "got": got}
                    break
                done += 1
                bar.update(1)
    finally:
        bar.close()
        sim.close()
    return done, time.perf_counter() - t0, failure


def _fuzz(args):
    from ga2_sw.cli import config_from_args
    config = config_from_args(args)
    done, seconds, failure = fuzz(config, args.count, args.seed, args.sim, batch=args.batch,
                                  progress=not args.no_progress, fault_rate=args.fault_rate, start=args.start)
    rate = done / seconds if seconds else float("inf")
    if failure:
        f = failure
        print(f"\nDIFFERENCE in program {f['index']} (replay alone: ga2 fuzz --seed {args.seed} --start {f['index']} "
              f"--count 1 with the same chip options; in Python: sim.random_programs.fuzz_job(config, {f['seed']})):")
        print(format_program(f["program"]))
        print(f"reference: {f['ref'].counters} {f['ref'].error.name} pc {f['ref'].pc}")
        got = f["got"]
        print(f"{args.sim}: {got.counters} {getattr(got.error, 'name', got.error)} pc {got.pc}")
        for line in f["diffs"]:
            print("  " + line)
        print(f"{done} programs agreed before it ({rate:,.1f} programs/s)")
        return 1
    print(f"{done} programs, all equal on {args.sim} and the reference machine (memories, six counters, error, "
          f"pc): {seconds:.1f} s, {rate:,.1f} programs/s")
    return 0


# -- ga2 cache ---------------------------------------------------------------------------------------------

def cache_report(clear=()):
    """Every cache of ``sim.cache.CACHES``: ``{"caches": [usage...], "cleared": [clear result...]}``, the
    caches named in ``clear`` emptied first (so the sizes shown are what is left)."""
    cleared = [caches.clear(name) for name in clear]
    return {"caches": [caches.usage(name) for name in caches.cache_names()], "cleared": cleared}


def _mb(n):
    return f"{n / 1e6:,.1f} MB"


def _cache(args):
    from ga2_sw.analyses.common import table, write_json
    report = cache_report(args.clear or ())
    for c in report["cleared"]:
        busy = f"; {c['in_use']} in use, left" if c["in_use"] else ""
        print(f"cleared {c['name']}: {c['removed']} entries, {_mb(c['bytes'])}{busy} ({c['path']})")
    rows = [[u["name"], u["entries"], _mb(u["bytes"]), u["path"] + ("" if u["exists"] else " (none yet)")]
            for u in report["caches"]]
    rows.append(["total", sum(u["entries"] for u in report["caches"]),
                 _mb(sum(u["bytes"] for u in report["caches"])), ""])
    print(table(["cache", "entries", "size", "path"], rows, ["<", ">", ">", "<"]))
    print("(each key holds what its entry depends on, the tools' paths and versions included: --json lists "
          "it; $GA2_CACHE and $GA2_SYNTH_CACHE move the caches)")
    if args.json:
        write_json(args.json, report)
    return 0


# What the options take.
REPEAT = Int(1, 10_000)
PYSIM_REPEAT = Int(1, 100)
COUNT = Int(1, 10**9)
START = Int(0, 10**12)
BATCH = Int(1, 100_000)
FAULT_RATE = Float(0.0, 1.0)


def register(sub):
    from ga2_sw.cli import add_config_arguments
    from ga2_sw.analyses.common import json_option
    p = sub.add_parser("bench-sim", help="simulated cycles per second of pysim, Verilator (and others) on the "
                       "decode-table programs")
    p.add_argument("--programs", default="decode-table", choices=("decode-table",),
                   help="program set (default %(default)s)")
    p.add_argument("--sims", default="pysim,verilator", metavar="A,B",
                   type=Names(backend_names, many=True, what="simulator"),
                   help=f"simulators: {', '.join(backend_names())} (default %(default)s)")
    p.add_argument("--repeat", type=REPEAT, default=20, metavar="N",
                   help=f"runs of each program on Verilator, for a stable figure, {REPEAT.describe()} "
                        f"(default %(default)s)")
    p.add_argument("--pysim-repeat", type=PYSIM_REPEAT, default=1, metavar="N",
                   help=f"runs of each program on pysim, {PYSIM_REPEAT.describe()} (default %(default)s; each pass "
                        f"takes ~10 s)")
    p.add_argument("--seed", type=Int(*SEED), default=4242,
                   help=f"workload seed, {SEED[0]}..{SEED[1]} (default %(default)s)")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the figures as JSON")
    add_config_arguments(p)
    p.set_defaults(func=_bench_sim, check=_check_bench_sim)

    p = sub.add_parser("fuzz", help="differential fuzzing: random valid and faulting programs on the RTL "
                       "against the reference machine")
    p.add_argument("--count", type=COUNT, default=1000, metavar="N",
                   help=f"programs, {COUNT.describe()} (default %(default)s)")
    p.add_argument("--seed", type=Int(*SEED), default=0, help=f"seed, {SEED[0]}..{SEED[1]} (default %(default)s)")
    p.add_argument("--sim", default="verilator", choices=backend_names(harness=True),
                   help="simulator (default %(default)s)")
    p.add_argument("--start", type=START, default=0, metavar="I", help=f"first case index, {START.describe()} "
                   "(replays case I with --count 1; default %(default)s)")
    p.add_argument("--batch", type=BATCH, metavar="N",
                   help=f"programs per simulator process, {BATCH.describe()} (default 200, fewer on a chip whose "
                        f"memories hold more than {BATCH_WORDS // 200:,} words)")
    p.add_argument("--fault-rate", type=FAULT_RATE, default=0.3, metavar="F",
                   help=f"fraction of programs that end in a faulting instruction, {FAULT_RATE.describe()} "
                        f"(default %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_arguments(p)
    p.set_defaults(func=_fuzz, check=lambda args: get_backend(args.sim).require())

    p = sub.add_parser("cache", help="the on-disk caches (Verilog, simulator builds, the model file, synthesis "
                       "results): where each is and how large; --clear empties them")
    p.add_argument("--clear", nargs="?", const=caches.cache_names(), default=None, metavar="CACHE,..",
                   type=Names(caches.cache_names, many=True, what="cache"),
                   help=f"remove the entries of every cache, or of those named: {', '.join(caches.cache_names())} "
                        f"(an entry another process is building is left)")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the table (and what was cleared) "
                   "as JSON, with what each cache's keys hold")
    p.set_defaults(func=_cache)
