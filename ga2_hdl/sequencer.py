"""The sequencer: instruction memory, fetch, decode, validation, dispatch, the five counters, HALT and the
error status."""

from amaranth.hdl import Module, Signal, Mux, Const
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ga2_sw.isa import Op, Err, USED_BITS, INSTR_BITS
from ga2_sw.numerics import MAX_SHIFT

from .ports import InstrLayout

__all__ = ["Sequencer", "UNITS"]

# Execution units in dispatch order, and the opcodes each one executes.
UNITS = {"dma": (Op.LD, Op.ST), "mm": (Op.MM,), "rq": (Op.RQ,), "sm": (Op.SM,)}
COUNTER_WIDTH = 32


class Sequencer(wiring.Component):
    """Runs the program in instruction memory one instruction at a time (in-order mode).

    Timing (docs/ISA.md): one fetch cycle after ``start``, then per instruction a DECODE cycle (the
    instruction word arrives from the memory and its extreme addresses are computed into registers) and a
    CHECK cycle (validation; ``start`` of the unit when the instruction is legal), then the unit's busy
    time. The next instruction is fetched in the unit's ``done`` cycle, so nothing is lost between
    instructions. A faulting instruction is never dispatched: nothing is written and the error code is
    held until the next ``start``.

    Members
    -------
    start : In(1)
        Starts the program at address 0 (clears the counters and the error).
    running, done : Out(1)
        ``done`` is high from HALT (or a fault) until the next ``start``.
    error : Out(3)
        ``ga2_sw.isa.Err`` code of the fault; 0 after a HALT.
    pc : Out
        Address of the instruction being executed, of the HALT, or of the faulting instruction.
    cycles, mm_cycles, dma_cycles, vec_cycles, instructions : Out(32)
        The counters.
    imem_we, imem_addr, imem_data : In
        Host write port of the instruction memory (use while the sequencer is not running).
    instr : Out(InstrLayout)
        The instruction being dispatched, valid with a unit's ``start``.
    <unit>_start : Out(1); <unit>_busy, <unit>_done : In(1)
        Handshake with each unit of ``UNITS``.
    """

    def __init__(self, config):
        self._config = config
        self._pc_width = ceil_log2(config.imem_words + 1)
        members = {
            "start": In(1), "running": Out(1), "done": Out(1), "error": Out(3), "pc": Out(self._pc_width),
            "cycles": Out(COUNTER_WIDTH), "mm_cycles": Out(COUNTER_WIDTH), "dma_cycles": Out(COUNTER_WIDTH),
            "vec_cycles": Out(COUNTER_WIDTH), "instructions": Out(COUNTER_WIDTH),
            "imem_we": In(1), "imem_addr": In(max(1, ceil_log2(config.imem_words))), "imem_data": In(INSTR_BITS),
            "instr": Out(InstrLayout),
        }
        for unit in UNITS:
            members.update({f"{unit}_start": Out(1), f"{unit}_busy": In(1), f"{unit}_done": In(1)})
        super().__init__(members)
        self.imem = memory.Memory(shape=INSTR_BITS, depth=config.imem_words, init=[])

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.imem = imem = self.imem
        wr = imem.write_port()
        rd = imem.read_port()
        m.d.comb += [wr.en.eq(self.imem_we), wr.addr.eq(self.imem_addr), wr.data.eq(self.imem_data)]

        ir = self.instr                       # the instruction register drives the units directly
        fresh = rd.data                       # the word fetched last cycle
        new = InstrLayout(fresh)

        # Extreme addresses of the instruction, computed in DECODE from the memory output and registered,
        # so CHECK only compares (keeps the multipliers off the dispatch path).
        hi_width = 30
        sp_hi = [Signal(hi_width, name=f"sp_hi_{n}") for n in range(3)]
        ext_hi = Signal(hi_width)
        op = new.op
        is_mm = op == Op.MM
        k1, m1, n1 = new.k - 1, new.M - 1, new.N - 1
        ln1 = new.len - 1
        mm_a_hi = new.src + m1 * new.lda + k1
        mm_b_hi = new.len + Mux(new.tb, n1 * new.ldb + k1, k1 * new.ldb + n1)
        mm_c_hi = new.dst + m1 * new.ldc + n1
        # LD: sp dst, ext src; ST: sp src, ext dst; RQ/SM: sp src and dst; MM: A, B, C.
        with m.If(is_mm):
            m.d.sync += [sp_hi[0].eq(mm_a_hi), sp_hi[1].eq(mm_b_hi), sp_hi[2].eq(mm_c_hi), ext_hi.eq(0)]
        with m.Elif(op == Op.LD):
            m.d.sync += [sp_hi[0].eq(new.dst + ln1), sp_hi[1].eq(0), sp_hi[2].eq(0), ext_hi.eq(new.src + ln1)]
        with m.Elif(op == Op.ST):
            m.d.sync += [sp_hi[0].eq(new.src + ln1), sp_hi[1].eq(0), sp_hi[2].eq(0), ext_hi.eq(new.dst + ln1)]
        with m.Elif((op == Op.RQ) | (op == Op.SM)):
            m.d.sync += [sp_hi[0].eq(new.src + ln1), sp_hi[1].eq(new.dst + ln1), sp_hi[2].eq(0), ext_hi.eq(0)]
        with m.Else():                                   # HALT and illegal words touch no memory
            m.d.sync += [h.eq(0) for h in sp_hi] + [ext_hi.eq(0)]

        # Stray bits: each legal opcode has a mask of the bits it may use.
        stray = Signal()
        with m.Switch(op):
            for o in Op:
                with m.Case(o):
                    m.d.comb += stray.eq((fresh & Const(((1 << INSTR_BITS) - 1) ^ USED_BITS[o], INSTR_BITS)) != 0)
            with m.Default():
                m.d.comb += stray.eq(1)
        illegal = Signal()
        shape_bad = Signal()
        m.d.comb += shape_bad.eq(Mux(is_mm,
                                     (new.M == 0) | (new.M > cfg.rows) | (new.N == 0) | (new.N > cfg.cols) | (new.k == 0),
                                     (op != Op.HALT) & ((new.len == 0) |
                                                        ((op == Op.RQ) & (new.M[0:6] > MAX_SHIFT)) |
                                                        ((op == Op.SM) & (new.len > cfg.sm_max_len)))))
        shape_reg = Signal()
        pc_overflow = Signal()

        pc = self.pc
        fetch_addr = Signal.like(pc)
        m.d.comb += rd.addr.eq(fetch_addr)

        counting = Signal()
        m.d.comb += self.running.eq(counting)
        with m.If(counting):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        with m.If(self.mm_busy):
            m.d.sync += self.mm_cycles.eq(self.mm_cycles + 1)
        with m.If(self.dma_busy):
            m.d.sync += self.dma_cycles.eq(self.dma_cycles + 1)
        with m.If(self.rq_busy | self.sm_busy):
            m.d.sync += self.vec_cycles.eq(self.vec_cycles + 1)

        any_done = Signal()
        m.d.comb += any_done.eq(self.dma_done | self.mm_done | self.rq_done | self.sm_done)

        def restart_on_start():
            with m.If(self.start):
                m.d.sync += [pc.eq(0), self.error.eq(0), self.cycles.eq(0), self.mm_cycles.eq(0),
                             self.dma_cycles.eq(0), self.vec_cycles.eq(0), self.instructions.eq(0)]
                m.next = "FETCH"

        with m.FSM(name="seq"):
            with m.State("IDLE"):
                restart_on_start()
            with m.State("FETCH"):
                m.d.comb += [counting.eq(1), fetch_addr.eq(pc)]
                m.next = "DECODE"
            with m.State("DECODE"):
                m.d.comb += [counting.eq(1), fetch_addr.eq(pc)]
                m.d.sync += [ir.as_value().eq(fresh), illegal.eq(stray), shape_reg.eq(shape_bad),
                             pc_overflow.eq(pc == cfg.imem_words)]
                m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += [counting.eq(1), fetch_addr.eq(pc)]
                err = Signal(3)
                m.d.comb += err.eq(
                    Mux(pc_overflow, Err.PC_OVERFLOW,
                    Mux(illegal, Err.ILLEGAL,
                    Mux(shape_reg, Err.SHAPE,
                    Mux((sp_hi[0] >= cfg.sp_words) | (sp_hi[1] >= cfg.sp_words) | (sp_hi[2] >= cfg.sp_words),
                        Err.SP_RANGE,
                    Mux(ext_hi >= cfg.ext_words, Err.EXT_RANGE, Err.NONE))))))
                with m.If(err != Err.NONE):
                    m.d.sync += self.error.eq(err)
                    m.next = "HALTED"
                with m.Elif(ir.op == Op.HALT):
                    m.d.sync += self.instructions.eq(self.instructions + 1)
                    m.next = "HALTED"
                with m.Else():
                    for unit, ops in UNITS.items():
                        m.d.comb += getattr(self, f"{unit}_start").eq(ir.op.matches(*ops))
                    m.next = "EXEC"
            with m.State("EXEC"):
                m.d.comb += [counting.eq(1), fetch_addr.eq(Mux(any_done, pc + 1, pc))]
                with m.If(any_done):
                    m.d.sync += [self.instructions.eq(self.instructions + 1), pc.eq(pc + 1)]
                    m.next = "DECODE"
            with m.State("HALTED"):
                m.d.comb += self.done.eq(1)
                restart_on_start()
        return m
