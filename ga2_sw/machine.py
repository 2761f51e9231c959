"""The reference machine: executes GA-2 programs bit-exactly and returns memories, counters and error."""

from dataclasses import dataclass, field

from .cycles import Counters, DecoupledTimer, busy_cycles, unit_of, FETCH_CYCLES, ISSUE_CYCLES, RQ_DEPTH, SP_WRITE_DELAY
from .isa import Op, Err, Instr, decode, check, encode
from .numerics import s8, s32, u32, requant, softmax_q16

__all__ = ["Machine", "Result", "run"]


@dataclass
class Result:
    ext: list
    sp: list
    counters: Counters
    error: Err
    pc: int                      # the HALT's or the faulting instruction's address

    @property
    def ok(self):
        return self.error == Err.NONE


def _image(words, size, what):
    words = list(words or [])
    if len(words) > size:
        raise ValueError(f"{what} image has {len(words)} words but the memory holds {size}")
    for n, w in enumerate(words):
        if not isinstance(w, int) or not 0 <= w <= 0xFFFFFFFF:
            raise ValueError(f"{what} image word {n} must be a 32-bit unsigned integer, not {w!r}")
    return words + [0] * (size - len(words))


class Machine:
    """Runs programs on a configuration. ``run`` never mutates its inputs."""

    def __init__(self, config):
        self.config = config

    def run(self, program, ext=None, sp=None):
        cfg = self.config
        if len(program) > cfg.imem_words:
            raise ValueError(f"Program has {len(program)} instructions but instruction memory holds {cfg.imem_words}")
        ext = _image(ext, cfg.ext_words, "External memory")
        sp = _image(sp, cfg.sp_words, "Scratchpad")
        words = [encode(p) if isinstance(p, Instr) else p for p in program]
        cycles, units, executed = FETCH_CYCLES, {"mm": 0, "dma": 0, "vec": 0}, 0
        # Decoupled, the scoreboard never lets two instructions with overlapping ranges run together, so the
        # memories are those of program order; only the timing differs, and the issue model times it.
        timer = DecoupledTimer(cfg) if cfg.decoupled else None

        def result(err, pc):
            if timer:
                counters = timer.stop(halted=err == Err.NONE)
            else:
                counters = Counters(cycles, units["mm"], units["dma"], units["vec"], executed)
            return Result(ext, sp, counters, err, pc)

        for pc in range(cfg.imem_words + 1):
            cycles += ISSUE_CYCLES
            if pc == cfg.imem_words:
                return result(Err.PC_OVERFLOW, pc)
            instr, err = decode(words[pc]) if pc < len(words) else (None, Err.ILLEGAL)
            if err == Err.NONE:
                err = check(instr, cfg)
            if err != Err.NONE:
                return result(err, pc)
            executed += 1
            if instr.op == Op.HALT:
                return result(Err.NONE, pc)
            _execute(instr, sp, ext)
            if timer:
                timer.issue(instr)
            x = busy_cycles(instr, cfg)
            cycles += x
            units[unit_of(instr.op)] += x


def _execute(i, sp, ext):
    if i.op == Op.LD:
        sp[i.dst:i.dst + i.len] = ext[i.src:i.src + i.len]
    elif i.op == Op.ST:
        ext[i.dst:i.dst + i.len] = sp[i.src:i.src + i.len]
    elif i.op == Op.MM:
        a = [[s8(sp[i.A + r * i.lda + k]) for k in range(i.K)] for r in range(i.M)]
        if i.tb:
            b = [[s8(sp[i.B + c * i.ldb + k]) for c in range(i.N)] for k in range(i.K)]
        else:
            b = [[s8(sp[i.B + k * i.ldb + c]) for c in range(i.N)] for k in range(i.K)]
        out = [[sum(a[r][k] * b[k][c] for k in range(i.K)) for c in range(i.N)] for r in range(i.M)]
        for r in range(i.M):                       # every operand is read before the first write
            for c in range(i.N):
                sp[i.dst + r * i.ldc + c] = u32(out[r][c])
    elif i.op == Op.RQ:
        # The requantiser pipeline: element t is read in step t and its result reaches memory in step
        # t + RQ_DEPTH + SP_WRITE_DELAY; a read sees only what reached memory in earlier steps.
        delay = RQ_DEPTH + SP_WRITE_DELAY
        read = []
        for t in range(i.len + delay):
            if t < i.len:
                read.append(sp[i.src + t])
            w = t - delay
            if w >= 0:
                sp[i.dst + w] = u32(requant(s32(read[w]), i.m, i.s))
    elif i.op == Op.SM:
        probs = softmax_q16([s8(sp[i.src + t]) for t in range(i.len)])
        sp[i.dst:i.dst + i.len] = probs


def run(program, config, ext=None, sp=None):
    return Machine(config).run(program, ext, sp)
