"""The cycle model of GA-2 in order mode: per-instruction busy times and the five counters (docs/ISA.md).

These formulas are the timing of the RTL's state machines, written down; the test-suite holds the
reference machine, pysim and Verilator to them."""

from dataclasses import dataclass, astuple

from .isa import Op, Err, decode, check, encode, Instr

__all__ = ["Counters", "busy_cycles", "unit_of", "cycle_counts", "ISSUE_CYCLES", "FETCH_CYCLES", "RQ_DEPTH",
           "SM_OVERHEAD", "DIVIDER_LATENCY"]

FETCH_CYCLES = 1        # the first instruction's fetch
ISSUE_CYCLES = 2        # decode, check: paid by every instruction, HALT and the faulting one included
RQ_DEPTH = 5            # requantiser: read, register, partial products, product, shift, round/saturate/write
SP_WRITE_DELAY = 1      # a write request reaches the scratchpad one cycle later (it is registered first)
DIVIDER_LATENCY = 17    # one quotient bit per stage
SM_OVERHEAD = 4 + DIVIDER_LATENCY   # read, score register, ROM, buffer read, then the divider


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
    """The counter an opcode's busy time is charged to."""
    return {Op.LD: "dma", Op.ST: "dma", Op.MM: "mm", Op.RQ: "vec", Op.SM: "vec"}.get(op)


def busy_cycles(instr, config):
    """Busy time X of the unit that executes a (valid) instruction."""
    i = instr
    if i.op == Op.LD:
        return i.len + config.ext_latency
    if i.op == Op.ST:
        return i.len + 1
    if i.op == Op.MM:
        return (i.K + 1) * (i.M + i.N) + i.M * i.N
    if i.op == Op.RQ:
        return i.len + RQ_DEPTH
    if i.op == Op.SM:
        return 3 * i.len + SM_OVERHEAD
    return 0


def _as_instr(item):
    """Accept Instr objects or encoded words; return (Instr or None, decode error)."""
    if isinstance(item, Instr):
        return item, Err.NONE
    return decode(item)


def cycle_counts(program, config):
    """(Counters, Err, pc) of a program, computed from the formulas alone, without executing it.

    Validation is static (it depends only on the instruction fields), so a faulting program's counters and
    error code come out here too. ``program`` is a list of Instr or of 128-bit words."""
    if len(program) > config.imem_words:
        raise ValueError(f"Program has {len(program)} instructions but instruction memory holds {config.imem_words}")
    cycles, per_unit, executed = FETCH_CYCLES, {"mm": 0, "dma": 0, "vec": 0}, 0
    for pc in range(config.imem_words + 1):
        if pc == config.imem_words:
            return Counters(cycles + ISSUE_CYCLES, per_unit["mm"], per_unit["dma"], per_unit["vec"], executed), \
                Err.PC_OVERFLOW, pc
        instr, err = _as_instr(program[pc]) if pc < len(program) else (None, Err.ILLEGAL)
        if err == Err.NONE:
            err = check(instr, config)
        cycles += ISSUE_CYCLES
        if err != Err.NONE:
            return Counters(cycles, per_unit["mm"], per_unit["dma"], per_unit["vec"], executed), err, pc
        executed += 1
        if instr.op == Op.HALT:
            return Counters(cycles, per_unit["mm"], per_unit["dma"], per_unit["vec"], executed), Err.NONE, pc
        x = busy_cycles(instr, config)
        cycles += x
        per_unit[unit_of(instr.op)] += x
