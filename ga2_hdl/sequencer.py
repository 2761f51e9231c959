"""The sequencer: instruction memory, fetch, decode, validation, dispatch, the five counters, HALT and the
error status."""

from amaranth.hdl import Module, Signal, Mux
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ga2_sw.isa import Op, Err, INSTR_BITS

from .checker import InstrChecker
from .ports import InstrLayout, access_layout
from .scoreboard import Scoreboard

__all__ = ["Sequencer", "UNITS"]

# Execution units in dispatch order, and the opcodes each one executes.
UNITS = {"dma": (Op.LD, Op.ST), "mm": (Op.MM,), "rq": (Op.RQ,), "sm": (Op.SM,)}
COUNTER_WIDTH = 32


class Sequencer(wiring.Component):
    """Runs the program in instruction memory.

    In order (docs/ISA.md): one fetch cycle after ``start``, then per instruction a DECODE cycle (the
    instruction word and its error code, computed when the host wrote it, arrive from their memories) and a
    CHECK cycle (``start`` of the unit when the code is 0, else halt with it), then the unit's busy time.
    The next instruction is fetched in the unit's ``done`` cycle, so nothing is lost between
    instructions. A faulting instruction is never dispatched: nothing is written and the error code is
    held until the next ``start``.

    Decoupled (``config.mode``): the instruction waits in CHECK until its lane (DMA or compute) is free and
    the ``Scoreboard`` sees no conflict with the instruction in flight on the other lane; it starts in that
    cycle and the next instruction is decoded in the cycle after, while the units run. A HALT or a fault
    waits in CHECK until both lanes are idle, so that memory and counters are final when ``done`` rises.
    ``ga2_sw.cycles.DecoupledTimer`` is this state machine as an event model.

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
        Host write port of the instruction memory (use while the sequencer is not running). Each word is
        validated as it is written; a ``start`` within ``CHECK_LATENCY`` cycles of the last write is held
        until the check has finished.
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
        # A zero word is illegal, so the error memory starts out saying so.
        self.errmem = memory.Memory(shape=3, depth=config.imem_words, init=[Err.ILLEGAL] * config.imem_words)
        # Decoupled: every word's scratchpad ranges, computed by the checker beside its error code.
        self.accmem = (memory.Memory(shape=access_layout(config), depth=config.imem_words, init=[])
                       if config.decoupled else None)

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.imem = imem = self.imem
        wr = imem.write_port()
        rd = imem.read_port()
        m.d.comb += [wr.en.eq(self.imem_we), wr.addr.eq(self.imem_addr), wr.data.eq(self.imem_data)]

        ir = self.instr                       # the instruction register drives the units directly

        # Every word's error code is computed as the host writes it (checker.py), so issuing an
        # instruction only reads its code from a memory beside the instruction memory.
        m.submodules.checker = checker = InstrChecker(cfg)
        m.submodules.errmem = errmem = self.errmem
        err_wr, err_rd = errmem.write_port(), errmem.read_port()
        m.d.comb += [checker.we.eq(self.imem_we), checker.addr.eq(self.imem_addr), checker.word.eq(self.imem_data),
                     err_wr.en.eq(checker.err_we), err_wr.addr.eq(checker.err_addr), err_wr.data.eq(checker.err)]
        word_err = Signal(3)
        pc_overflow = Signal()
        err = Signal(3)                 # the code of the instruction in CHECK
        m.d.comb += err.eq(Mux(pc_overflow, Err.PC_OVERFLOW, word_err))

        pc = self.pc
        fetch_addr = Signal.like(pc)
        m.d.comb += [rd.addr.eq(fetch_addr), err_rd.addr.eq(fetch_addr)]

        if cfg.decoupled:
            m.submodules.accmem = accmem = self.accmem
            acc_wr, acc_rd = accmem.write_port(), accmem.read_port()
            m.submodules.scoreboard = scoreboard = Scoreboard(cfg)
            m.d.comb += [acc_wr.en.eq(checker.err_we), acc_wr.addr.eq(checker.err_addr),
                         acc_wr.data.eq(checker.access), acc_rd.addr.eq(fetch_addr)]
            compute_busy = Signal()
            m.d.comb += [compute_busy.eq(self.mm_busy | self.rq_busy | self.sm_busy),
                         scoreboard.dma_busy.eq(self.dma_busy), scoreboard.compute_busy.eq(compute_busy)]

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

        # A start that comes while the checker still holds a word waits for it (docs/ARCHITECTURE.md).
        start_pending = Signal()
        go = Signal()
        m.d.comb += go.eq((self.start | start_pending) & ~checker.busy)
        m.d.sync += start_pending.eq((self.start | start_pending) & checker.busy)

        def restart_on_start():
            with m.If(go):
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
                m.d.sync += [ir.as_value().eq(rd.data), word_err.eq(err_rd.data),
                             pc_overflow.eq(pc == cfg.imem_words)]
                if cfg.decoupled:
                    m.d.sync += scoreboard.cand.eq(acc_rd.data)
                m.next = "CHECK"
            if cfg.decoupled:
                with m.State("CHECK"):
                    self._issue_decoupled(m, ir, err, fetch_addr, counting, scoreboard, compute_busy)
            else:
                self._issue_inorder(m, ir, err, fetch_addr, counting, any_done)
            with m.State("HALTED"):
                # A start waiting for the checker already hides the old results.
                m.d.comb += self.done.eq(~(self.start | start_pending))
                restart_on_start()
        return m

    def _issue_inorder(self, m, ir, err, fetch_addr, counting, any_done):
        """CHECK and EXEC in order: start the unit, wait for its done."""
        pc = self.pc
        with m.State("CHECK"):
            m.d.comb += [counting.eq(1), fetch_addr.eq(pc)]
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
            # The next word is read all through EXEC, so the unit's done never reaches the memory's
            # address (done -> address was the critical path at 88 MHz): it is ready whenever done comes.
            m.d.comb += [counting.eq(1), fetch_addr.eq(pc + 1)]
            with m.If(any_done):
                m.d.sync += [self.instructions.eq(self.instructions + 1), pc.eq(pc + 1)]
                m.next = "DECODE"

    def _issue_decoupled(self, m, ir, err, fetch_addr, counting, scoreboard, compute_busy):
        """The CHECK state of decoupled mode: issue when the lane is free and nothing conflicts."""
        pc = self.pc
        # The next word is read all the time: it is ready in the cycle after the issue.
        m.d.comb += [counting.eq(1), fetch_addr.eq(pc + 1)]
        idle = ~self.dma_busy & ~compute_busy
        is_dma = ir.op.matches(Op.LD, Op.ST)
        go = Signal()
        m.d.comb += [go.eq((err == Err.NONE) & (ir.op != Op.HALT) & ~Mux(is_dma, self.dma_busy, compute_busy) &
                           ~scoreboard.hazard),
                     scoreboard.issue.eq(go), scoreboard.issue_dma.eq(is_dma)]
        with m.If(err != Err.NONE):
            with m.If(idle):
                m.d.sync += self.error.eq(err)
                m.next = "HALTED"
        with m.Elif(ir.op == Op.HALT):
            with m.If(idle):
                m.d.sync += self.instructions.eq(self.instructions + 1)
                m.next = "HALTED"
        with m.Elif(go):
            for unit, ops in UNITS.items():
                m.d.comb += getattr(self, f"{unit}_start").eq(ir.op.matches(*ops))
            m.d.sync += [self.instructions.eq(self.instructions + 1), pc.eq(pc + 1)]
            m.next = "DECODE"
