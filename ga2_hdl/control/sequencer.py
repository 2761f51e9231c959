"""The sequencer: instruction memory, fetch, decode, validation, dispatch, the counters, HALT and the error
status."""

from amaranth.hdl import Cat, Module, Signal, Mux, unsigned
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.isa import LANES, OPS, Op, Err, INSTR_BITS, unit_lane, unit_ops, units_of

from ..ports import COUNTERS, ERR_WIDTH, InstrLayout, HostSignature, UnitSignature

__all__ = ["Sequencer", "issue_layout"]


def issue_layout(checker):
    """What the decoupled sequencer keeps of each instruction word beside it, computed by ``checker`` (an
    ``InstrChecker``) at load time: the ``ranges`` the scoreboard compares (``access_layout``) and the ``units``
    the word may start (one bit per ``ga2_sw.isa.units_of(features)``; none when it faults or halts); on an AXI4
    chip, the ``dma`` plan of an LD or ST (``ga2_hdl.dma.burst_plan``)."""
    plan = {"dma": checker.plan_layout} if checker.plan_layout is not None else {}
    return data.StructLayout({"ranges": checker.access.shape(), "units": unsigned(len(checker.units)), **plan})


class Sequencer(wiring.Component):
    """Runs the program in instruction memory.

    In order (docs/ISA.md): one fetch cycle after ``start``, then per instruction a DECODE cycle (the
    instruction word and its error code, computed when the host wrote it, arrive from their memories) and a
    CHECK cycle (``start`` of the unit when the code is 0, else halt with it), then the unit's busy time.
    The next instruction is fetched in the unit's ``done`` cycle, so nothing is lost between
    instructions. A faulting instruction is never dispatched: nothing is written and the error code is
    held until the next ``start``.

    Decoupled (built with a ``scoreboard``): the instruction waits in CHECK until its lane (``ga2_sw.isa.LANES``: DMA,
    matrix, vector) is free and the ``Scoreboard`` sees no conflict with the instructions in flight on the other
    lanes; it starts in that cycle and the next instruction is decoded in the cycle after, while the units run.
    A HALT or a fault waits in CHECK until every lane is idle and the matrix unit's result writer has finished
    (``draining``), so that memory and counters are final when ``done`` rises.
    ``ga2_sw.cycles.DecoupledTimer`` is this state machine as an event model.

    Parameters: the ``checker`` (an ``InstrChecker``) that validates each word as the host writes it, which
    also says the chip's instruction memory, units and features; decoupled, the ``scoreboard`` (a
    ``Scoreboard``), which says which units hold two instructions. The sequencer holds both as submodules.

    Members
    -------
    host : In(HostSignature(imem_words))
        The host's port: program writes, ``start``, ``done``, ``error``, ``pc`` and the counters. Each
        instruction word is validated as it is written; a ``start`` within ``CHECK_LATENCY`` cycles of the
        last write is held until the check has finished.
    units : Out(UnitSignature).array(len(units_of(features)))
        The handshake with each execution unit, in the order of ``ga2_sw.isa.units_of(features)``; ``units[n].start``
        rises for the opcodes ``unit_ops(name)`` of unit ``n``.
    ext_quiet : In(1)
        No external write is left unanswered after this cycle (an AXI4 port's B channel, ``AxiDMA.quiet``); a
        HALT or a fault also waits for it, so that external memory is final when ``done`` rises. 1 when not
        driven (the bare port's writes land in their cycle).
    dma_stall : In(1)
        The DMA waits on the bus this cycle beyond what the ideal memory would make it wait (``AxiDMA.stalled``),
        counted in ``stall_cycles``. 0 when not driven (the bare port never stalls).
    stopped : Out(1)
        No program is running and every unit has drained: a register, 1 from reset, cleared as a program starts
        (the cycle after ``start``), set the cycle after the program halts or faults (whose CHECK waited for every
        lane and ``ext_quiet``): the state machine is in IDLE or HALTED exactly then, and this is a register of its
        own so that no state decode sits in front of the debug reads' request registers. The host's debug reads,
        which share a lane's scratchpad port, run only then.
    rq_older : In(1)
        With ``rq_overlap``: the RQ before the requantiser's last is still writing
        (``OverlappedRequantiser.older``); the scoreboard keeps its ranges in flight.
    dma_older : In(1)
        With ``ld_overlap``: the LD before the DMA's last is still writing (``PackedDMA.older``); the scoreboard
        keeps its ranges in flight. An ST waits for every LD's last write (the DMA's ``draining``): its reads
        would meet the LD's writes on the banks' port A.
    dma_plan : Out(checker.plan_layout)
        With a checker that plans the AXI4 DMA's bursts (a decoupled AXI4 chip's): the burst plan of the word in CHECK (worked out by
        the checker when the host wrote it, kept beside it), loaded with the instruction register; the AXI DMA
        takes it with the instruction.
    """

    def __init__(self, *, checker, scoreboard=None):
        self._checker, self._scoreboard_unit = checker, scoreboard
        words = checker.imem_words
        self._units = units_of(checker.features)   # the chip's units (the online unit only with Feature.ONLINE)
        self._rq_overlap = scoreboard is not None and scoreboard.rq_overlap
        self._ld_overlap = scoreboard is not None and scoreboard.ld_overlap
        self._planned = checker.plan_layout is not None
        super().__init__({"host": In(HostSignature(words)), "units": Out(UnitSignature()).array(len(self._units)),
                          "ext_quiet": In(1, init=1), "dma_stall": In(1),
                          "stopped": Out(1, init=1),
                          **({"rq_older": In(1)} if self._rq_overlap else {}),
                          **({"dma_older": In(1)} if self._ld_overlap else {}),
                          **({"dma_plan": Out(checker.plan_layout)} if self._planned else {})})
        self.imem = memory.Memory(shape=INSTR_BITS, depth=words, init=[])
        # A zero word is illegal, so the error memory starts out saying so.
        self.errmem = memory.Memory(shape=ERR_WIDTH, depth=words, init=[Err.ILLEGAL] * words)
        # Decoupled: every word's scratchpad ranges, computed by the checker beside its error code.
        self.accmem = (memory.Memory(shape=issue_layout(checker), depth=words, init=[])
                       if scoreboard is not None else None)

    def _busy_of(self, key, value, draining=False):
        """Any unit busy (or, with ``draining``, also draining) whose opcodes have ``OPS[op].<key> == value``
        (a lane or a counter)."""
        return Cat(*(port.busy | (port.draining if draining else 0) for name, port in zip(self._units, self.units)
                     if getattr(OPS[unit_ops(name)[0]], key) == value)).any()

    def _draining(self):
        """Any unit draining (the matrix unit's result writer, decoupled; with ``rq_overlap``, the requantiser)."""
        return Cat(*(port.draining for port in self.units)).any()

    def _unit(self, name):
        """The handshake port of unit ``name``."""
        return self.units[self._units.index(name)]

    def _dispatch(self, m, ir):
        """Start the unit that executes ``ir`` (this cycle)."""
        for name, port in zip(self._units, self.units):
            m.d.comb += port.start.eq(ir.op.matches(*unit_ops(name)))

    def _count(self, m, counting):
        """The cycle counter, the three busy counters and the DMA's stall count."""
        host = self.host
        with m.If(counting):
            m.d.sync += host.cycles.eq(host.cycles + 1)
        for counter in ("mm", "dma", "vec"):
            total = getattr(host, f"{counter}_cycles")
            with m.If(self._busy_of("counter", counter, draining=True)):
                m.d.sync += total.eq(total + 1)
        with m.If(self.dma_stall):
            m.d.sync += host.stall_cycles.eq(host.stall_cycles + 1)

    def elaborate(self, platform):
        m = Module()
        host = self.host
        checker, rd, err_rd = self._memories(m)

        ir = Signal(InstrLayout)              # the instruction register drives every unit's instr
        m.d.comb += [port.instr.eq(ir) for port in self.units]
        word_err, pc_overflow, err = Signal(ERR_WIDTH), Signal(), Signal(ERR_WIDTH)
        m.d.comb += err.eq(Mux(pc_overflow, Err.PC_OVERFLOW, word_err))   # the code of the word in CHECK
        pc, fetch_addr = host.pc, Signal.like(host.pc)
        m.d.comb += [rd.addr.eq(fetch_addr), err_rd.addr.eq(fetch_addr)]
        counting = Signal()
        m.d.comb += host.running.eq(counting)
        self._count(m, counting)

        # A start that comes while the checker still holds a word waits for it (docs/ARCHITECTURE.md).
        start_pending, go = Signal(), Signal()
        m.d.comb += go.eq((host.start | start_pending) & ~checker.busy)
        m.d.sync += start_pending.eq((host.start | start_pending) & checker.busy)

        scoreboard = self._scoreboard(m, checker) if self._scoreboard_unit is not None else None
        with m.FSM(name="seq"):
            for state in ("IDLE", "HALTED"):
                with m.State(state):
                    if state == "HALTED":     # a start waiting for the checker already hides the old results
                        m.d.comb += host.done.eq(~(host.start | start_pending))
                    with m.If(go):
                        m.d.sync += [pc.eq(0), host.error.eq(0), self.stopped.eq(0),
                                     *(getattr(host, name).eq(0) for name in COUNTERS)]
                        m.next = "FETCH"
            with m.State("FETCH"):
                m.d.comb += [counting.eq(1), fetch_addr.eq(pc)]
                m.next = "DECODE"
            with m.State("DECODE"):
                m.d.comb += [counting.eq(1), fetch_addr.eq(pc)]
                past_end = pc == self._checker.imem_words
                m.d.sync += [ir.as_value().eq(rd.data), word_err.eq(err_rd.data), pc_overflow.eq(past_end)]
                if scoreboard is not None:        # the word's ranges, computed by the checker at load time
                    m.d.comb += [scoreboard.load.eq(1), self._acc_addr.eq(pc + 1)]
                    m.d.sync += self._first_check.eq(1)
                    # The units the word may start, from a register (_scoreboard): from the memories' outputs,
                    # the opcode's decode and the error code were a 10.87 ns path on a 25F seed.
                    m.d.sync += self._ready.eq(Mux(past_end, 0, self._next_word.units))
                    if self._ld_overlap:      # an ST waits for the LDs' last writes: whether the word is one
                        m.d.sync += self._store.eq(self._next_word.units[self._units.index("dma")] &
                                                   self._next_word.ranges.a.rd)
                    if self._planned:
                        m.d.sync += self.dma_plan.eq(self._next_word.dma)
                m.next = "CHECK"
            if scoreboard is not None:
                self._issue_decoupled(m, ir, err, fetch_addr, counting, scoreboard)
            else:
                self._issue_inorder(m, ir, err, fetch_addr, counting)
        return m

    def _memories(self, m):
        """The instruction memory and, beside it, the memory of each word's error code, both written by the host;
        (the checker, the instruction memory's read port, the error codes' read port)."""
        host = self.host
        m.submodules.imem = imem = self.imem
        m.submodules.errmem = errmem = self.errmem
        m.submodules.checker = checker = self._checker
        wr, rd = imem.write_port(), imem.read_port()
        err_wr, err_rd = errmem.write_port(), errmem.read_port()
        # Every word's error code is computed as the host writes it (checker.py), so issuing an
        # instruction only reads its code from a memory beside the instruction memory.
        m.d.comb += [wr.en.eq(host.imem_we), wr.addr.eq(host.imem_addr), wr.data.eq(host.imem_data),
                     checker.we.eq(host.imem_we), checker.addr.eq(host.imem_addr), checker.word.eq(host.imem_data),
                     err_wr.en.eq(checker.err_we), err_wr.addr.eq(checker.err_addr), err_wr.data.eq(checker.err)]
        return checker, rd, err_rd

    def _halt(self, m, *also):
        """End the program from CHECK (a HALT or a fault, once everything has drained): ``also``'s statements, the
        ``stopped`` register set (every way to HALTED sets it, so the host's debug reads run after any of them)."""
        m.d.sync += [*also, self.stopped.eq(1)]
        m.next = "HALTED"

    def _issue_inorder(self, m, ir, err, fetch_addr, counting):
        """CHECK and EXEC in order: start the unit, wait for its done."""
        host, pc = self.host, self.host.pc
        with m.State("CHECK"):
            m.d.comb += [counting.eq(1), fetch_addr.eq(pc)]
            with m.If(err != Err.NONE):
                with m.If(self.ext_quiet):
                    self._halt(m, host.error.eq(err))
            with m.Elif(ir.op == Op.HALT):
                with m.If(self.ext_quiet):
                    self._halt(m, host.instructions.eq(host.instructions + 1))
            with m.Else():
                self._dispatch(m, ir)
                m.next = "EXEC"
        with m.State("EXEC"):
            # The next word is read all through EXEC, so the unit's done never reaches the memory's
            # address (done -> address was the critical path at 88 MHz): it is ready whenever done comes.
            m.d.comb += [counting.eq(1), fetch_addr.eq(pc + 1)]
            with m.If(Cat(*(port.done for port in self.units)).any()):
                m.d.sync += [host.instructions.eq(host.instructions + 1), pc.eq(pc + 1)]
                m.next = "DECODE"

    def _scoreboard(self, m, checker):
        """Decoupled mode: the checker's ranges and units of every word in a memory beside the program
        (``issue_layout``), and the scoreboard that compares the waiting word's ranges with those in flight.

        The ranges reach the scoreboard from a register, not from the block RAM: compared straight from its
        output (whose clock-to-output alone is 5.8 ns on ECP5), the eighteen magnitude compares made the
        decoupled chip's critical path (67.45 MHz, routed on an LFE5U-45F). So the memory is read a word
        ahead: in DECODE and CHECK it reads word ``pc + 1``, whose ranges are in the register when that word's
        DECODE comes, however soon it issues (DECODE, CHECK, DECODE: read in the first, registered in the
        second); before the first DECODE (IDLE, HALTED, FETCH) it reads word 0. The checker writes every word
        before ``start`` is taken, so word 0 is read after its last write."""
        m.submodules.accmem = accmem = self.accmem
        m.submodules.scoreboard = scoreboard = self._scoreboard_unit
        acc_wr, acc_rd = accmem.write_port(), accmem.read_port()
        # The read address is 0 but in DECODE and CHECK (set there).
        self._acc_addr, self._next_word = Signal.like(acc_rd.addr), Signal.like(acc_rd.data, name="next_word")
        # The units the word in CHECK may start: loaded in DECODE, two terms of each start in CHECK.
        self._ready = Signal(len(self._units), name="ready")
        self._first_check = Signal(name="first_check")      # the word in CHECK arrived in the last cycle
        if self._ld_overlap:
            # A DMA word that reads its (first) scratchpad range is an ST, one that writes it an LD.
            assert OPS[Op.ST].sp[0][1] == "r" and OPS[Op.LD].sp[0][1] == "w"
            self._store = Signal(name="store")
        m.d.sync += self._next_word.eq(acc_rd.data)
        m.d.comb += [acc_wr.en.eq(checker.err_we), acc_wr.addr.eq(checker.err_addr),
                     acc_wr.data.ranges.eq(checker.access), acc_wr.data.units.eq(checker.units),
                     *([acc_wr.data.dma.eq(checker.dma)] if self._planned else []),
                     acc_rd.addr.eq(self._acc_addr), scoreboard.ranges.eq(self._next_word.ranges),
                     scoreboard.busy.eq(Cat(*(self._busy_of("lane", lane) for lane in LANES)))]
        if self._rq_overlap or self._ld_overlap:     # each lane's draining unit apart
            m.d.comb += scoreboard.draining.eq(self._unit("mm").draining)
            if self._rq_overlap:
                m.d.comb += [scoreboard.vector_draining.eq(self._unit("rq").draining),
                             scoreboard.vector_older.eq(self.rq_older)]
            if self._ld_overlap:
                m.d.comb += [scoreboard.dma_draining.eq(self._unit("dma").draining),
                             scoreboard.dma_older.eq(self.dma_older)]
        else:
            m.d.comb += scoreboard.draining.eq(self._draining())
        return scoreboard

    def _issue_decoupled(self, m, ir, err, fetch_addr, counting, scoreboard):
        """The CHECK state of decoupled mode: issue when the lane is free and nothing conflicts.

        Each unit's start is its ``ready`` bit (the word in CHECK is its and does not fault), its lane's busy bit
        and the scoreboard's ``blocked`` bit for that lane, all registers or one gate from them: the start
        pulse loads the state of units across the chip, and every gate in front of it was on the decoupled
        chip's critical path (lanes' busy bits to the matrix unit's state machines, 97.98 MHz median on a 25F)."""
        host, pc = self.host, self.host.pc
        lane_busy = scoreboard.busy
        lanes = [LANES.index(unit_lane(name)) for name in self._units]       # each unit's lane, by index
        starts = [self._ready[n] & ~lane_busy[lane] & ~scoreboard.blocked[lane] for n, lane in enumerate(lanes)]
        if self._rq_overlap:
            # The requantiser takes an RQ while it drains the one before; the vector lane's other units wait for
            # its last write (their requests would meet its writes on port B).
            rq_draining = self._unit("rq").draining
            starts = [start & ~rq_draining if unit_lane(name) == "vector" and name != "rq" else start
                      for name, start in zip(self._units, starts)]
        if self._ld_overlap:
            # The DMA takes an LD while the last one's beats still come in; an ST waits for the last write.
            dma = self._units.index("dma")
            starts[dma] = starts[dma] & ~(self._store & self._unit("dma").draining)
        go = Signal()
        m.d.comb += [*(port.start.eq(start) for port, start in zip(self.units, starts)),
                     go.eq(Cat(*starts).any()),
                     scoreboard.issue.eq(Cat(*(Cat(*(start for start, lane in zip(starts, lanes) if lane == n)).any()
                                               for n in range(len(LANES)))))]
        with m.State("CHECK"):
            # The next word is read all the time: it is ready in the cycle after the issue.
            m.d.comb += [counting.eq(1), fetch_addr.eq(pc + 1), self._acc_addr.eq(pc + 1)]
            # A word that reaches CHECK without a fault will issue (or, a HALT, end the program): it is counted
            # in its first CHECK cycle (`first_check`, set in DECODE), from registers, not with the issue
            # decision. (Counted with the issue, the lanes' busy bits ran through the scoreboard and the
            # decision into the enables of the counter's 32 flip-flops: the decoupled chip's worst path on two
            # 25F seeds, 93.37 and 82.49 MHz, 8.5 and 9.9 ns of routing.) The host reads the counter once the
            # program has ended, when the two ways agree.
            m.d.sync += self._first_check.eq(0)
            with m.If(self._first_check & (err == Err.NONE)):
                m.d.sync += host.instructions.eq(host.instructions + 1)
            idle = ~lane_busy.any() & ~scoreboard.draining & self.ext_quiet
            if self._rq_overlap:
                idle &= ~self._unit("rq").draining
            if self._ld_overlap:
                idle &= ~self._unit("dma").draining
            with m.If(err != Err.NONE):
                with m.If(idle):
                    self._halt(m, host.error.eq(err))
            with m.Elif(ir.op == Op.HALT):
                with m.If(idle):
                    self._halt(m)
            with m.Elif(go):
                # `ready` keeps its bit through DECODE, which loads the next word's; the lane is busy by then.
                m.d.sync += pc.eq(pc + 1)
                m.next = "DECODE"
