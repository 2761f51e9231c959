"""``ga2 bench-sim`` and ``ga2 fuzz``: simulator speed on the decode-table programs, and differential fuzzing
of the RTL (Verilator or Icarus) against the reference machine.

Also the random-program generator both the fuzz command and tests/test_differential.py use. It draws every
choice through ``draw(lo, hi)`` (inclusive), so the same code runs on ``random.Random.randint`` (the command:
seeded and reproducible) and on Hypothesis's ``st.integers`` (the tests: shrinkable)."""

import random
import sys
import time

from ga2_sw import isa
from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.isa import Op, Err, Instr, USED_BITS, INSTR_BITS, encode
from ga2_sw.machine import Machine

__all__ = ["register", "random_valid_instr", "random_fault", "random_program", "random_words", "FAULT_KINDS",
           "FUZZ_CONFIG", "FAULT_ERRORS", "compare_results", "format_words", "fuzz_job"]

# The differential tests' and the fuzzer's default chip: small memories, so images are cheap to move and
# faults and PC overflow are easy to reach.
FUZZ_CONFIG = Config(sp_words=512, ext_words=512, imem_words=64)

FAULT_KINDS = ("illegal_opcode", "stray_bits", "halt_stray", "shape", "sp_range", "ext_range", "fall_off",
               "pc_overflow")


# -- random programs ---------------------------------------------------------------------------------------

def _pick(draw, options):
    return options[draw(0, len(options) - 1)]


def _length(draw, hi):
    """A length in 1..hi, mostly short, sometimes the largest."""
    hi = max(1, hi)
    mode = draw(0, 7)
    if mode == 0:
        return hi
    if mode <= 5:
        return draw(1, min(hi, 8))
    return draw(1, hi)


def _near(draw, base, lo, hi):
    """An address at or a few words around ``base`` (overlapping ranges), clamped to lo..hi."""
    return max(lo, min(hi, base + draw(-6, 8)))


def random_valid_instr(draw, config):
    """One instruction that passes ``isa.check`` on ``config``."""
    sp, ext = config.sp_words, config.ext_words
    op = _pick(draw, (Op.LD, Op.ST, Op.MM, Op.MM, Op.RQ, Op.RQ, Op.SM))
    if op in (Op.LD, Op.ST):
        n = _length(draw, min(sp, ext, 96))
        spa, exa = draw(0, sp - n), draw(0, ext - n)
        return isa.ld(spa, exa, n) if op == Op.LD else isa.st(spa, exa, n)
    if op == Op.RQ:
        n = _length(draw, min(sp, 96))
        src = draw(0, sp - n)
        dst = _pick(draw, (lambda: draw(0, sp - n), lambda: _near(draw, src, 0, sp - n), lambda: src))()
        m = _pick(draw, (lambda: draw(-32768, 32767), lambda: _pick(draw, (-32768, 32767, 0, 1, -1, 16384))))()
        s = _pick(draw, (lambda: draw(0, 47), lambda: _pick(draw, (0, 1, 15, 16, 31, 32, 46, 47))))()
        return isa.rq(dst, src, n, m, s)
    if op == Op.SM:
        n = _length(draw, min(config.sm_max_len, sp))
        src = draw(0, sp - n)
        dst = _pick(draw, (lambda: draw(0, sp - n), lambda: _near(draw, src, 0, sp - n), lambda: src))()
        return isa.sm(dst, src, n)
    # MM: shapes up to the array, strides incl. 0 (broadcast rows) and overlaps of C with A or B.
    M, N = draw(1, config.rows), draw(1, config.cols)
    K = _pick(draw, (lambda: draw(1, 8), lambda: draw(1, 24), lambda: draw(1, 64), lambda: draw(1, 8),
                     lambda: draw(1, 24), lambda: draw(1, 400)))()
    K = max(1, min(K, sp // max(M, N)))            # packed operands always fit (tiny scratchpads)
    tb = draw(0, 1)
    lda = _pick(draw, (K, 0, draw(0, 64)))
    ldb = _pick(draw, (K if tb else N, 0, draw(0, 64)))
    ldc = _pick(draw, (N, 0, draw(0, 64)))
    a_span = (M - 1) * lda + K
    b_span = ((N - 1) * ldb + K) if tb else ((K - 1) * ldb + N)
    c_span = (M - 1) * ldc + N
    if max(a_span, b_span, c_span) > sp:           # only on tiny scratchpads: fall back to packed strides
        lda, ldb, ldc = K, (K if tb else N), N
        a_span, b_span, c_span = M * K, K * N, M * N
    A, B = draw(0, sp - a_span), draw(0, sp - b_span)
    dst = _pick(draw, (lambda: draw(0, sp - c_span), lambda: min(A, sp - c_span), lambda: min(B, sp - c_span)))()
    return isa.mm(dst, A, B, M, K, N, tb, lda, ldb, ldc)


def _stray_bit(draw, op):
    free = [b for b in range(INSTR_BITS) if not (USED_BITS[op] >> b) & 1]
    return 1 << _pick(draw, free)


def random_fault(draw, config, kind):
    """(instruction or raw word, expected error) of one faulting instruction of ``kind`` (FAULT_KINDS minus
    fall_off and pc_overflow, which are program shapes)."""
    sp, ext = config.sp_words, config.ext_words
    if kind == "illegal_opcode":
        opcode = _pick(draw, (0, 7, 8, 9, 10, 11, 12, 13, 14, 15))
        body = _pick(draw, (lambda: 0, lambda: draw(0, (1 << 62) - 1) << _pick(draw, (4, 40, 66))))()
        return ((body << 4) & ((1 << INSTR_BITS) - 1)) | opcode, Err.ILLEGAL
    if kind == "stray_bits":
        word = encode(random_valid_instr(draw, config))
        return word | _stray_bit(draw, Op(word & 0xF)), Err.ILLEGAL
    if kind == "halt_stray":
        return encode(isa.halt()) | _stray_bit(draw, Op.HALT), Err.ILLEGAL
    if kind == "shape":
        variant = draw(0, 7)
        if variant == 0:
            return Instr(_pick(draw, (Op.LD, Op.ST, Op.RQ, Op.SM)), dst=draw(0, 100), src=draw(0, 100), len=0), Err.SHAPE
        if variant == 1:
            return isa.mm(0, 0, 0, _pick(draw, (0, config.rows + 1, 255)), 1, 1), Err.SHAPE
        if variant == 2:
            return isa.mm(0, 0, 0, 1, 1, _pick(draw, (0, config.cols + 1, 255))), Err.SHAPE
        if variant == 3:
            return isa.mm(0, 0, 0, 1, 0, 1), Err.SHAPE
        if variant == 4:
            return isa.rq(0, 0, draw(1, 8), draw(-5, 5), draw(48, 63)), Err.SHAPE
        if variant == 5:
            return isa.sm(0, 0, draw(config.sm_max_len + 1, min(65535, config.sm_max_len + 40))), Err.SHAPE
        if variant == 6:                         # SHAPE outranks a range fault in the same instruction
            return isa.rq(65000, 65000, 10, 1, draw(48, 63)), Err.SHAPE
        return isa.mm(65000, 0, 0, 1, 1, 0), Err.SHAPE
    if kind == "sp_range":
        variant = draw(0, 4)
        if variant == 0:
            n = draw(1, 64)
            return isa.ld(draw(sp - n + 1, min(65535, sp + 5)), 0, n), Err.SP_RANGE
        if variant == 1:                         # SP_RANGE outranks EXT_RANGE
            n = draw(1, 64)
            return isa.st(draw(sp - n + 1, 65535), ext, n), Err.SP_RANGE
        if variant == 2:
            n = draw(1, min(16, config.sm_max_len))
            src, dst = draw(0, sp - n), draw(sp - n + 1, 65535)
            ins = isa.rq(dst, src, n, 1, 0) if draw(0, 1) else isa.sm(dst, src, n)
            if draw(0, 1):
                ins = Instr(ins.op, dst=ins.src, src=ins.dst, len=ins.len, m=ins.m, s=ins.s)
            return ins, Err.SP_RANGE
        if variant == 3:                         # one operand just past the end through a stride
            M = draw(2, config.rows) if config.rows > 1 else 1
            lda = draw(1, 200)
            K = draw(1, 8)
            A = max(0, sp - (M - 1) * lda - K + 1 + draw(0, 3))
            return isa.mm(0, A, 0, M, K, 1, 0, lda, 1, 1), Err.SP_RANGE
        which = draw(0, 2)                       # A, B or C starts at the last word and runs past it
        tb = draw(0, 1)
        if which == 2 and config.cols == 1:
            return isa.mm(min(sp, 65535), 0, 0, 1, 1, 1), Err.SP_RANGE
        ins = isa.mm(sp - 1 if which == 2 else 0, sp - 1 if which == 0 else 0, sp - 1 if which == 1 else 0,
                     1, 2, 2 if config.cols > 1 else 1, tb, 2, 2, 2)
        return ins, Err.SP_RANGE
    if kind == "ext_range":
        n = draw(1, 64)
        spa = draw(0, sp - n)
        exa = draw(ext - n + 1, 65535)
        return (isa.ld(spa, exa, n) if draw(0, 1) else isa.st(spa, exa, n)), Err.EXT_RANGE
    raise ValueError(f"Unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")


FAULT_ERRORS = {"illegal_opcode": Err.ILLEGAL, "stray_bits": Err.ILLEGAL, "halt_stray": Err.ILLEGAL,
                "shape": Err.SHAPE, "sp_range": Err.SP_RANGE, "ext_range": Err.EXT_RANGE, "fall_off": Err.ILLEGAL,
                "pc_overflow": Err.PC_OVERFLOW}


def _cramped(config):
    """``config`` with the memories shrunk to their smallest: instructions valid there are valid on
    ``config`` too, and crowded into 64 words they overlap all the time (hazards for decoupled mode)."""
    return config.replace(sp_words=64, ext_words=64)


def random_program(draw, config, fault=None, max_len=10, cramped=False):
    """A program: random valid instructions, then HALT (fault None), or then one faulting instruction of
    kind ``fault`` (a few more instructions after it, never reached). ``fall_off`` leaves out the HALT
    (the zeroed instruction memory faults); ``pc_overflow`` fills the whole instruction memory.
    ``cramped`` draws about two of three valid instructions inside the first 64 words of both memories, so
    that loads, stores and compute read and write each other's words (RAW, WAR and WAW hazards)."""
    if fault == "pc_overflow":
        prog = []
        for _ in range(config.imem_words):
            n = draw(1, 4)
            prog.append(_pick(draw, (lambda: isa.ld(draw(0, config.sp_words - n), draw(0, config.ext_words - n), n),
                                     lambda: isa.rq(draw(0, config.sp_words - n), draw(0, config.sp_words - n), n,
                                                    draw(-300, 300), draw(0, 12))))())
        return prog
    small = _cramped(config) if cramped else config
    prog = [random_valid_instr(draw, small if draw(0, 2) else config) for _ in range(draw(0 if fault else 1, max_len))]
    prog = prog[:config.imem_words - 2]
    if fault is None:
        return prog + [isa.halt()]
    if fault == "fall_off":
        return prog[:config.imem_words - 1]
    bad, _ = random_fault(draw, config, fault)
    tail = [random_valid_instr(draw, config) for _ in range(draw(0, 2))] + [isa.halt()]
    return (prog + [bad] + tail)[:config.imem_words]


def random_words(rng, n):
    """``n`` memory words from ``random.Random`` ``rng``: int8 operands, int32 accumulators, raw words and
    extremes mixed (the int8 view of a raw word has garbage above bit 7, which the units must ignore)."""
    out = []
    for _ in range(n):
        k = rng.random()
        if k < 0.45:
            out.append(rng.randint(-128, 127) & 0xFFFFFFFF)
        elif k < 0.65:
            out.append(rng.randint(-(1 << 20), 1 << 20) & 0xFFFFFFFF)
        elif k < 0.9:
            out.append(rng.getrandbits(32))
        else:
            out.append(rng.choice((0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7F, 0x80, 0xFF, 0xFFFFFF80)))
    return out


def fuzz_job(config, seed, fault_rate=0.3):
    """One reproducible fuzz case from an integer seed: (program, ext image, sp image)."""
    rng = random.Random(seed)
    draw = rng.randint
    fault = None
    if rng.random() < fault_rate:
        fault = rng.choice(FAULT_KINDS)
    program = random_program(draw, config, fault, cramped=rng.random() < 0.5)
    ext = random_words(rng, rng.choice((0, 16, config.ext_words)))
    sp = random_words(rng, rng.choice((0, 64, config.sp_words)))
    return program, ext, sp


def cycle_limit_for(program, config):
    """A cycle limit generous for a correct chip (twice the cycle model's count) and short for a hung one."""
    counters, _, _ = cycle_counts(program, config)
    return 2 * counters.cycles + 1000


# -- comparison --------------------------------------------------------------------------------------------

def format_words(words, limit=8):
    return ", ".join(f"[{a}] {w:#010x}" for a, w in words[:limit]) + (" ..." if len(words) > limit else "")


def compare_results(ref, got, check_sp=True):
    """Differences between two Results as readable lines; [] when they agree (memories, all five counters,
    error and pc)."""
    diffs = []
    if getattr(got, "hang", False):
        return [f"the simulator did not halt (pc={got.pc}); the reference halted with {ref.error.name} at pc {ref.pc}"]
    for name in ("cycles", "mm", "dma", "vec", "instructions"):
        a, b = getattr(ref.counters, name), getattr(got.counters, name)
        if a != b:
            diffs.append(f"counter {name}: reference {a}, simulator {b}")
    if int(ref.error) != int(got.error):
        diffs.append(f"error: reference {ref.error.name} ({int(ref.error)}), simulator "
                     f"{getattr(got.error, 'name', got.error)} ({int(got.error)})")
    if ref.pc != got.pc:
        diffs.append(f"pc: reference {ref.pc}, simulator {got.pc}")
    mems = [("ext", ref.ext, got.ext)] + ([("sp", ref.sp, got.sp)] if check_sp else [])
    for name, a, b in mems:
        if b is None:
            continue
        bad = [(i, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y]
        if len(a) != len(b):
            diffs.append(f"{name}: reference has {len(a)} words, simulator {len(b)}")
        if bad:
            diffs.append(f"{name}: {len(bad)} words differ; reference " + format_words([(i, x) for i, x, _ in bad])
                         + "; simulator " + format_words([(i, y) for i, _, y in bad]))
    if getattr(got, "ext_oob", 0):
        diffs.append(f"the chip made {got.ext_oob} external accesses beyond the memory")
    if getattr(got, "sp_port_mismatch", 0):
        diffs.append(f"{got.sp_port_mismatch} scratchpad words read through dbg_sp_data differ from the memory")
    return diffs


def format_program(program):
    """Assembly of a program; raw words that do not decode are shown as ``.word 0x...`` with the reason."""
    lines = []
    for pc, p in enumerate(program):
        word = p if isinstance(p, int) else encode(p)
        instr, err = isa.decode(word)
        text = str(instr) if instr is not None else f".word {word:#034x}    # {err.name}"
        lines.append(f"{pc:4d}: {text}")
    return "\n".join(lines)


# -- simulators by name ------------------------------------------------------------------------------------

def _make_sim(name, config):
    if name == "verilator":
        from .verilator import VerilatorSim
        return VerilatorSim(config)
    if name == "icarus":
        from .icarus import IcarusSim
        return IcarusSim(config)
    raise ValueError(f"Unknown simulator {name!r} for this command; known: verilator, icarus")


# -- ga2 bench-sim -----------------------------------------------------------------------------------------

def _timed_pysim(config, program, ext):
    """run_pysim with its CPU time: ``seconds`` covers ``sim.run()`` only, so the CPU time of the whole call
    (elaboration included) is scaled by the share of wall time ``sim.run()`` took."""
    from .pysim_runner import run_pysim
    w0, c0 = time.perf_counter(), time.process_time()
    r = run_pysim(config, program, ext)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    r.cpu_seconds = cpu * min(1.0, r.seconds / wall) if wall > 0 else r.seconds
    return r


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
        t0 = time.perf_counter()
        if name == "pysim":
            results = [_timed_pysim(config, p.program, p.ext) for p in runs]
        elif name == "model":
            results = []
            for p in runs:
                t1, c1 = time.perf_counter(), time.process_time()
                r = ref.run(p.program, p.ext)
                r.seconds, r.cpu_seconds = time.perf_counter() - t1, time.process_time() - c1
                r.sim_cycles = r.counters.cycles
                results.append(r)
        else:
            sim = _make_sim(name, config)
            entry.update(build_seconds=round(sim.build_time, 2), cached=sim.cached,
                         load_seconds=round(sim.load_time, 3))
            t0 = time.perf_counter()
            results = sim.run_many([(p.program, p.ext) for p in runs])
            sim.close()
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


def _bench_sim(args):
    from ga2_sw.cli import config_from_args
    from ga2_sw.analyses.common import write_json
    config = config_from_args(args)
    if args.programs != "decode-table":
        raise ValueError(f"Unknown program set {args.programs!r}; known: decode-table")
    sims = [s.strip() for s in args.sims.split(",") if s.strip()]
    for s in sims:
        if s not in ("model", "pysim", "verilator", "icarus"):
            raise ValueError(f"Unknown simulator {s!r}; known: model, pysim, verilator, icarus")
    report = bench_sim(config, sims, seed=args.seed, repeat=args.repeat, pysim_repeat=args.pysim_repeat)
    _print_bench(report)
    if args.json:
        write_json(args.json, report)
    return 0 if all(e["matches_reference"] for e in report["sims"].values()) else 1


# -- ga2 fuzz ----------------------------------------------------------------------------------------------

def fuzz(config, count, seed, sim_name="verilator", batch=200, progress=True, out=sys.stdout, fault_rate=0.3,
         start=0):
    """Differential fuzzing; returns (programs run, seconds, first failure or None). Case i uses the seed
    ``seed * 1_000_003 + i`` (i from ``start``), so one failing case can be replayed alone."""
    from tqdm import tqdm
    sim = _make_sim(sim_name, config)
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
    if args.count < 1:
        raise ValueError(f"--count must be at least 1, not {args.count}")
    done, seconds, failure = fuzz(config, args.count, args.seed, args.sim, batch=args.batch,
                                  progress=not args.no_progress, fault_rate=args.fault_rate, start=args.start)
    rate = done / seconds if seconds else float("inf")
    if failure:
        f = failure
        print(f"\nDIFFERENCE in program {f['index']} (replay alone: ga2 fuzz --seed {args.seed} --start {f['index']} "
              f"--count 1 with the same chip options; in Python: sim.commands.fuzz_job(config, {f['seed']})):")
        print(format_program(f["program"]))
        print(f"reference: {f['ref'].counters} {f['ref'].error.name} pc {f['ref'].pc}")
        got = f["got"]
        print(f"{args.sim}: {got.counters} {getattr(got.error, 'name', got.error)} pc {got.pc}")
        for line in f["diffs"]:
            print("  " + line)
        print(f"{done} programs agreed before it ({rate:,.1f} programs/s)")
        return 1
    print(f"{done} programs, all equal on {args.sim} and the reference machine (memories, five counters, error, "
          f"pc): {seconds:.1f} s, {rate:,.1f} programs/s")
    return 0


def register(sub):
    from ga2_sw.cli import add_config_arguments
    p = sub.add_parser("bench-sim", help="simulated cycles per second of pysim, Verilator (and others) on the "
                       "decode-table programs")
    p.add_argument("--programs", default="decode-table", help="program set (default %(default)s)")
    p.add_argument("--sims", default="pysim,verilator", metavar="A,B",
                   help="simulators: model, pysim, verilator, icarus (default %(default)s)")
    p.add_argument("--repeat", type=int, default=20, metavar="N",
                   help="runs of each program on Verilator, for a stable figure (default %(default)s)")
    p.add_argument("--pysim-repeat", type=int, default=1, metavar="N",
                   help="runs of each program on pysim (default %(default)s; each pass takes ~10 s)")
    p.add_argument("--seed", type=int, default=4242, help="workload seed (default %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    add_config_arguments(p)
    p.set_defaults(func=_bench_sim)

    p = sub.add_parser("fuzz", help="differential fuzzing: random valid and faulting programs on the RTL "
                       "against the reference machine")
    p.add_argument("--count", type=int, default=1000, metavar="N", help="programs (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed (default %(default)s)")
    p.add_argument("--sim", default="verilator", choices=("verilator", "icarus"), help="simulator (default %(default)s)")
    p.add_argument("--start", type=int, default=0, metavar="I", help="first case index (replays case I with "
                   "--count 1; default %(default)s)")
    p.add_argument("--batch", type=int, default=200, metavar="N", help="programs per simulator process (default %(default)s)")
    p.add_argument("--fault-rate", type=float, default=0.3, metavar="F",
                   help="fraction of programs that end in a faulting instruction (default %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_arguments(p)
    p.set_defaults(func=_fuzz, **{f"cfg_{k}": v for k, v in FUZZ_CONFIG.to_dict().items()})
