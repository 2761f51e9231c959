"""The cycle model of GA-2: per-instruction busy times and the five counters (docs/ISA.md), in both modes.

In order, one instruction runs at a time and the counters follow from the busy times alone. Decoupled,
the DMA lane (LD, ST), the matrix lane (MM) and the vector lane (RQ, SM) run side by side and a scoreboard holds
back an instruction whose scratchpad ranges conflict with an instruction in flight on another lane:
``DecoupledTimer`` is that issue logic written as an event model (docs/ARCHITECTURE.md, "Decoupled execution").

These formulas are the timing of the RTL's state machines, written down; the test-suite holds the
reference machine, pysim and Verilator to them."""

from dataclasses import dataclass, astuple

from .banking import bank_of, rq_write_skew, slice_addresses
from .isa import LANES, OPS, Op, Err, decode, check, footprints, Instr
from .timing import (FETCH_CYCLES, ISSUE_CYCLES, RQ_DEPTH, SP_WRITE_DELAY, DIVIDER_LATENCY, SM_OVERHEAD,
                     STREAM_MM_OVERHEAD, MM_DRAIN_CYCLES, MM_PLAN_CYCLES, PORT_B_ANNOUNCE, rq_latency, sm_overhead)

__all__ = ["Counters", "busy_cycles", "unit_of", "lane_of", "accesses", "conflict", "ranges_conflict", "EXT_SPACE",
           "cycle_counts", "run_program", "DecoupledTimer", "InorderTimer", "vector_port_b", "mm_last_cycle",
           "ISSUE_CYCLES", "FETCH_CYCLES", "RQ_DEPTH", "SM_OVERHEAD", "DIVIDER_LATENCY", "STREAM_MM_OVERHEAD",
           "SP_WRITE_DELAY"]


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
    """Decoupled mode's lane of an opcode (``isa.LANES``: DMA, matrix, vector; one instruction in flight each)."""
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


def vector_port_b(instr, start, config):
    """The banks an RQ or SM started in cycle ``start`` takes on port B, as ``{cycle: {bank, ...}}``: the cycle
    in which each of its read and write requests leaves the announce register (``PORT_B_ANNOUNCE`` after the
    unit's request, from the schedules of docs/ISA.md), which is when the matrix unit's requests of the same
    cycle would reach the bank with it. The matrix unit gives way to these (``mm_last_cycle``)."""
    taken = {}

    def request(cycle, addr):
        taken.setdefault(cycle + PORT_B_ANNOUNCE, set()).add(bank_of(addr, config))
    n = instr.len
    if instr.op == Op.RQ:           # element i: read in cycle 1+i, written rq_latency (+ skew) cycles later
        first_write = start + 1 + rq_latency(config) + rq_write_skew(instr, config)
        for i in range(n):
            request(start + 1 + i, instr.src + i)
            request(first_write + i, instr.dst + i)
    elif instr.op == Op.SM:         # two reading passes, then the quotients from cycle 2n + 1 + overhead on
        first_write = start + 2 * n + 1 + sm_overhead(config)
        for i in range(n):
            request(start + 1 + i, instr.src + i)
            request(start + n + 1 + i, instr.src + i)
            request(first_write + i, instr.dst + i)
    else:
        raise ValueError(f"{instr.op.name} is not on the vector lane")
    return taken


def mm_last_cycle(instr, start, taken, config):
    """The last busy cycle of a decoupled MM started in cycle ``start``, beside a vector lane that holds the banks
    ``taken`` (``{cycle: banks}``, ``vector_port_b``) on port B.

    The streaming feeder computes the first addresses and plans the first slice in the ``MM_PLAN_CYCLES`` cycles
    after ``start`` and reads from the next on, slice after slice: in each
    cycle every operand of the slice not yet read is read, unless an earlier one not yet read is on its bank or
    the vector lane asks for its bank in that cycle. ``MM_DRAIN_CYCLES`` after the last slice's last read the
    first result can be written; the results are written in row-major order, one a cycle, each in the first
    cycle from then on in which the vector lane does not ask for its bank. Without the vector lane this is
    ``start + busy_cycles(instr)`` (``banking.mm_extra_cycles``), which is what it returns when no cycle of that
    span is taken."""
    plain = start + busy_cycles(instr, config)
    first_read = start + 1 + MM_PLAN_CYCLES
    if not any(cycle in taken for cycle in range(first_read, plain + 1)):
        return plain
    free = lambda cycle, addr: bank_of(addr, config) not in taken.get(cycle, ())     # noqa: E731
    cycle = first_read
    for k in range(instr.K):
        banks = [bank_of(a, config) for a in slice_addresses(instr, k)]
        pending = list(range(len(banks)))
        while True:
            held, waiting = taken.get(cycle, ()), []
            seen = set()
            for p in pending:
                if banks[p] in seen or banks[p] in held:
                    waiting.append(p)
                seen.add(banks[p])
            if not waiting:
                break                   # the slice's last reads are in this cycle
            pending = waiting
            cycle += 1
        cycle += 1
    cycle += MM_DRAIN_CYCLES            # the first write's cycle at the earliest
    for i in range(instr.M):
        for j in range(instr.N):
            while not free(cycle, instr.dst + i * instr.ldc + j):
                cycle += 1
            cycle += 1
    return cycle - 1


class DecoupledTimer:
    """The decoupled issue logic as an event model: feed it the valid instructions in program order.

    Cycle 0 is the first fetch. Instruction n is decoded in cycle ``D`` and waits in the check state from
    cycle ``D + 1`` until (a) its lane's unit has finished (the cycle after the lane's last busy cycle) and
    (b) no conflicting instruction is in flight on another lane; in that cycle it starts (its unit is busy
    from the next cycle) and instruction n + 1 is decoded in the cycle after. A HALT or a fault waits for
    every lane to finish; the cycle it leaves the check state in is the last one counted.

    The matrix and vector lanes share the banks' port B, and the vector lane (RQ, SM: fixed pipelines) has it
    first: an MM in flight loses the cycles in which its next read or write would meet the vector lane on a
    bank (``mm_last_cycle``). Those are known once the vector instruction has started, so an MM's last busy
    cycle is worked out again whenever a vector instruction starts beside it. Nothing waits on that MM between
    its start and the vector instruction's (instructions issue in program order), so no decision already
    taken depends on the value that changes."""

    def __init__(self, config):
        self.config = config
        self.decode = FETCH_CYCLES               # cycle in which the next instruction is decoded
        self.last = {lane: None for lane in LANES}  # (instr, last busy cycle) of each lane
        self.executed = 0
        self.starts = []                         # [instr, start cycle, last busy cycle] in program order
        self._taken = {}                         # cycle -> the banks the vector lane asks port B for
        self._matrix = None                      # the index in `starts` of the last MM

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
        start, lane = self.earliest_start(instr), lane_of(instr.op)
        if instr.op == Op.MM:
            end = mm_last_cycle(instr, start, self._taken, self.config)
            self._matrix = len(self.starts)
        else:
            end = start + busy_cycles(instr, self.config)
        if lane == "vector":
            for cycle, banks in vector_port_b(instr, start, self.config).items():
                self._taken.setdefault(cycle, set()).update(banks)
            if self._matrix is not None and self.starts[self._matrix][2] > start:
                mm, mm_start, _ = record = self.starts[self._matrix]
                record[2] = mm_last_cycle(mm, mm_start, self._taken, self.config)
                self.last["matrix"] = (mm, record[2])
        self.last[lane] = (instr, end)
        self.executed += 1
        self.starts.append([instr, start, end])
        self.decode = start + 1
        return start

    @property
    def per_unit(self):
        """Busy cycles per counter so far (an MM's as worked out last)."""
        totals = {"mm": 0, "dma": 0, "vec": 0}
        for instr, start, end in self.starts:
            totals[unit_of(instr.op)] += end - start
        return totals

    def stop(self, halted):
        """Counters after a HALT (``halted``) or a fault in the instruction now in the check state."""
        end = max([self.decode + 1] + [self._lane_free(lane) for lane in self.last])
        per_unit = self.per_unit
        return Counters(end + 1, per_unit["mm"], per_unit["dma"], per_unit["vec"],
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
