"""The cycle model of GA-2: per-instruction busy times and the five counters (docs/ISA.md), in both modes.

In order, one instruction runs at a time and the counters follow from the busy times alone. Decoupled,
the DMA lane (LD, ST) runs beside the compute lane (MM, RQ, SM) and a scoreboard holds back an instruction
whose scratchpad ranges conflict with the instruction in flight on the other lane: ``DecoupledTimer`` is
that issue logic written as an event model (docs/ARCHITECTURE.md, "Decoupled execution").

These formulas are the timing of the RTL's state machines, written down; the test-suite holds the
reference machine, pysim and Verilator to them."""

from dataclasses import dataclass, astuple

from .isa import OPS, Op, Err, decode, check, footprints, Instr
from .timing import (FETCH_CYCLES, ISSUE_CYCLES, RQ_DEPTH, SP_WRITE_DELAY, DIVIDER_LATENCY, SM_OVERHEAD,
                     STREAM_MM_OVERHEAD)

__all__ = ["Counters", "busy_cycles", "unit_of", "lane_of", "accesses", "conflict", "ranges_conflict", "EXT_SPACE", "cycle_counts", "run_program",
           "DecoupledTimer", "InorderTimer", "ISSUE_CYCLES", "FETCH_CYCLES", "RQ_DEPTH", "SM_OVERHEAD",
           "DIVIDER_LATENCY", "STREAM_MM_OVERHEAD", "SP_WRITE_DELAY"]


@dataclass(frozen=True)
class Counters:
    """The chip's five counters."""
    cycles: int = 0
    mm: int = 0
    dma: int = 0
    vec: int = 0
    instructions: int = 0

    def as_tuple(self):
        return astuple(self)

    def __add__(self, other):
        return Counters(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))


def unit_of(op):
    """The counter an opcode's busy time is charged to (``isa.OPS``)."""
    return OPS[op].counter


def busy_cycles(instr, config):
    """Busy time X of the unit that executes a (valid) instruction (``isa.OPS``)."""
    return OPS[instr.op].busy(instr, config)


def lane_of(op):
    """Decoupled mode's two lanes: the DMA lane and the compute lane (one instruction in flight each)."""
    return OPS[op].lane


# The external memory's ranges in ``accesses(..., external=True)``: word a of the external memory is address
# EXT_SPACE + a, past every scratchpad address, so one overlap test serves both memories and a scratchpad
# range never meets an external one.
EXT_SPACE = 1 << 64


def accesses(instr, external=False):
    """The ranges an instruction touches as (lo, hi, reads, writes), hi inclusive: its scratchpad ranges
    (``isa.OPS[op].sp``, in ``footprints`` order) and, with ``external``, its external-memory ranges after
    them (``.ext``), shifted by ``EXT_SPACE``.

    An MM's operand ranges are the bounding ranges of its strided reads: the scoreboard compares these,
    so an MM may wait for a write between its rows that it never reads (a false hazard costs time, never
    correctness)."""
    sp, ext = footprints(instr)
    spec = OPS[instr.op]
    out = [(lo, hi, k == "r", k == "w") for (lo, hi), (_, k) in zip(sp, spec.sp)]
    if external:
        out += [(EXT_SPACE + lo, EXT_SPACE + hi, k == "r", k == "w") for (lo, hi), (_, k) in zip(ext, spec.ext)]
    return out


def ranges_conflict(xs, ys):
    """True when a write in one list of ``accesses`` overlaps any range of the other (RAW, WAR and WAW)."""
    return any((xw and (yr or yw) or xr and yw) and xlo <= yhi and ylo <= xhi
               for xlo, xhi, xr, xw in xs for ylo, yhi, yr, yw in ys)


def conflict(x, y, external=False):
    """True when two instructions touch a common word and at least one of them writes it (RAW, WAR and WAW
    alike). Scratchpad only by default: that is the scoreboard's rule for two instructions in flight
    together (only the DMA lane touches external memory, so two of them are never in flight at once);
    with ``external`` also external memory, the rule for keeping two instructions in program order
    (``schedule.dependences``)."""
    return ranges_conflict(accesses(x, external), accesses(y, external))


class DecoupledTimer:
    """The decoupled issue logic as an event model: feed it the valid instructions in program order.

    Cycle 0 is the first fetch. Instruction n is decoded in cycle ``D`` and waits in the check state from
    cycle ``D + 1`` until (a) its lane's unit has finished (the cycle after the lane's last busy cycle) and
    (b) no conflicting instruction is in flight on the other lane; in that cycle it starts (its unit is busy
    from the next cycle) and instruction n + 1 is decoded in the cycle after. A HALT or a fault waits for
    both lanes to finish; the cycle it leaves the check state in is the last one counted."""

    def __init__(self, config):
        self.config = config
        self.decode = FETCH_CYCLES               # cycle in which the next instruction is decoded
        self.last = {"dma": None, "compute": None}    # (instr, last busy cycle) of each lane
        self.per_unit = {"mm": 0, "dma": 0, "vec": 0}
        self.executed = 0
        self.starts = []                         # (instr, start cycle, last busy cycle) in program order

    def _lane_free(self, lane):
        last = self.last[lane]
        return -1 if last is None else last[1] + 1

    def earliest_start(self, instr):
        """The cycle ``instr`` would start in if it were the next instruction (the timer is not changed)."""
        lane = lane_of(instr.op)
        start = max(self.decode + 1, self._lane_free(lane))
        for other in self.last.values():
            if other is not None and other[1] >= start and conflict(instr, other[0]):
                start = other[1] + 1
        return start

    def issue(self, instr):
        start = self.earliest_start(instr)
        x = busy_cycles(instr, self.config)
        self.last[lane_of(instr.op)] = (instr, start + x)
        self.per_unit[unit_of(instr.op)] += x
        self.executed += 1
        self.starts.append((instr, start, start + x))
        self.decode = start + 1
        return start

    def stop(self, halted):
        """Counters after a HALT (``halted``) or a fault in the instruction now in the check state."""
        end = max([self.decode + 1] + [self._lane_free(lane) for lane in self.last])
        return Counters(end + 1, self.per_unit["mm"], self.per_unit["dma"], self.per_unit["vec"],
                        self.executed + (1 if halted else 0))


class InorderTimer:
    """In-order timing with the same interface as ``DecoupledTimer``: every instruction pays the issue
    cycles, then its unit's busy time, and nothing overlaps."""

    def __init__(self, config):
        self.config = config
        self.cycles = FETCH_CYCLES
        self.per_unit = {"mm": 0, "dma": 0, "vec": 0}
        self.executed = 0

    def issue(self, instr):
        x = busy_cycles(instr, self.config)
        self.cycles += ISSUE_CYCLES + x
        self.per_unit[unit_of(instr.op)] += x
        self.executed += 1

    def stop(self, halted):
        """Counters after a HALT (``halted``) or a fault in the instruction now being checked."""
        return Counters(self.cycles + ISSUE_CYCLES, self.per_unit["mm"], self.per_unit["dma"],
                        self.per_unit["vec"], self.executed + (1 if halted else 0))


def _as_instr(item):
    """Accept Instr objects or encoded words; return (Instr or None, decode error)."""
    if isinstance(item, Instr):
        return item, Err.NONE
    return decode(item)


def run_program(program, config, execute=None):
    """The program-counter loop of the chip: ``(Counters, Err, pc)`` of a program.

    Fetches, decodes and validates each instruction in turn, calls ``execute(instr)`` on every valid one
    (the reference machine passes its semantics; the cycle model passes nothing), and times it with the
    mode's timer. ``pc`` is the address of the HALT or of the faulting instruction. Validation is static
    (it depends only on the instruction fields), so a faulting program's counters and error code come out
    without executing anything. ``program`` is a list of Instr or of 128-bit words."""
    if len(program) > config.imem_words:
        raise ValueError(f"Program has {len(program)} instructions but instruction memory holds {config.imem_words}")
    timer = DecoupledTimer(config) if config.decoupled else InorderTimer(config)
    for pc in range(config.imem_words + 1):
        if pc == config.imem_words:
            return timer.stop(False), Err.PC_OVERFLOW, pc
        instr, err = _as_instr(program[pc]) if pc < len(program) else (None, Err.ILLEGAL)
        if err == Err.NONE:
            err = check(instr, config)
        if err != Err.NONE:
            return timer.stop(False), err, pc
        if instr.op == Op.HALT:
            return timer.stop(True), Err.NONE, pc
        if execute is not None:
            execute(instr)
        timer.issue(instr)


def cycle_counts(program, config):
    """(Counters, Err, pc) of a program, computed from the formulas alone, without executing it: in order
    or, in decoupled mode, through ``DecoupledTimer``."""
    return run_program(program, config)
