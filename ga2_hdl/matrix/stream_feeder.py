"""The matrix unit's streaming operand feeder (decoupled mode): a k-slice per cycle where its operands sit on
distinct banks, through one scratchpad read port per array row and one per array column."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ga2_sw.timing import (BANKED_DATA_DELAY, BANKED_READ_DELAY, BANKED_SELECT_DELAY, MM_DRAIN_CYCLES,
                           MM_PLAN_CYCLES, STREAM_MM_OVERHEAD)

from ..memory.banked_scratchpad import bank_index
from .feeder import FeederSignature
from ..ports import SpReadSignature, optional_field
from ..memory.scratchpad import or_all
from ..valid_chain import delayed

__all__ = ["StreamFeeder"]

# Cycle 1 computes the first slice's addresses from the fields latched at start, and cycle 2 plans the slice:
# which of its operands share a bank. (Planning it in the start cycle itself put the sequencer's instruction,
# the operand address adders, the bank adders and their compares in one path: 63 MHz on ECP5; computing the
# addresses there, the instruction bus's routes across the die and the adders were the next, 83 MHz on a 45F.)
PLAN_CYCLES = MM_PLAN_CYCLES
# The cycles from an operand's read request to its data: the scratchpad's request register, the read, the
# bank's data register and the select register.
READ_LATENCY = BANKED_READ_DELAY + 1 + BANKED_DATA_DELAY + BANKED_SELECT_DELAY
# The cycles from the read request of the last slice's last operands (cycle c) to the cycle before the tile's
# first result can be written: their data arrives in the hold registers (c + READ_LATENCY), the array takes the
# slice (c + READ_LATENCY + 1) and PE(0,0) accumulates its last product (c + READ_LATENCY + 2). The cycle model
# counts these, with the plan cycles, as STREAM_MM_OVERHEAD; the result writer waits them out (result_writer.py).
STEP_DELAY = READ_LATENCY + 1
DRAIN_CYCLES = STEP_DELAY + 1
# The copies of the per-bank codes of operands still to read, one for each group of registers the slice's end
# enables (StreamFeeder.elaborate).
END_COPIES = 4
# Up to THERMOMETER_OPERANDS operands a slice (a 4 x 4 array's 8), each bank's count of operands still to read is a
# thermometer code and two operands share a bank where their one-hot banks meet: a gate or two of registers in
# the read loop (the feeder's timing, below). Both grow with the square of the operands: on the llm chip's 8 x 16
# array (24 operands, 32 banks) the codes took 24,224 LUT4 and the pairs' compares 12,406 of the chip's 102,226.
# Beyond it the counts are binary and the pairs compare the banks' indices (``_BinaryCounts``).
THERMOMETER_OPERANDS = 8


class StreamFeeder(wiring.Component):
    """Feeds an MM to the ``rows`` x ``cols`` array one k-slice at a time: row ``i``'s port reads ``A[i][k]`` and
    column ``j``'s port ``Bop(k, j)``, each operand through its own scratchpad read port.

    The decoupled scratchpad is banked (``ga2_sw.banking``) and serves one read per bank per cycle, so a slice
    whose operands share banks is read over several cycles: in each cycle every operand not yet read is read
    unless an earlier one (in the order ``A[0..M)``, ``Bop[0..N)``) not yet read is on its bank. So the operand
    with ``r`` earlier operands on its bank is read in the slice's cycle ``r``, and the slice takes as many
    cycles as the most operands on one bank (``ga2_sw.banking.slice_rounds``). The vector lane shares port B
    and has it first: an operand whose bank it asks for in a cycle waits a cycle (``vector_banks``;
    ``ga2_sw.cycles.mm_schedule`` is this rule in the cycle model). Which operands share a bank is
    registered with the slice's addresses (from the next slice's addresses and banks, which are registers
    too), and so is, per bank, how many of its operands are still to read (the slice ends when no bank has
    two, or one on a bank taken), so a read cycle holds only registers, a few gates and the scratchpad's routing.

    Schedule, with ``start`` in cycle 0:

    * cycle 1: the first slice's addresses are computed from the latched fields; cycle 2: the first slice is
      planned (which of its operands share a bank); from cycle 3 on the slices are read, slice after slice
      (``K + extra`` cycles, ``extra = ga2_sw.banking.mm_extra_cycles``); the other ports stay disabled. The
      last slice's last reads are the feeder's last cycle (``done``, cycle ``L``): a new ``start`` is taken
      from the next cycle on, while the array still finishes this tile.
    * an operand is registered into its hold register in the cycle its data arrives, ``READ_LATENCY`` cycles
      after its read request (the banked scratchpad registers compute-lane requests and the banks' data); the
      array takes slice ``k`` from the hold registers ``STEP_DELAY`` cycles after the slice's last read
      request (``step``, with ``last`` on slice ``K - 1``), and runs on with bubbles
      in the other cycles (:class:`~ga2_hdl.matrix.tiled_array.TiledSystolicArray`). Hold registers of rows ``>= M``
      and columns ``>= N`` keep whatever they held: they meet only in cells outside the ``M`` x ``N`` result.
    * PE(0,0) has its result ``DRAIN_CYCLES`` after ``L``; the result writer writes from cycle ``L +
      DRAIN_CYCLES + 1`` on (``ga2_sw.cycles.mm_schedule``).

    The result writer of the previous tile may still be writing while this one is read. Its writes have port B
    first (``writer_banks``, like the vector lane's), and the last slice is not read until it has finished
    (``writer_busy``): the last slice's products overwrite the cells' results, which the writer must have
    written by then. When the writer is busy in the cycle before the last slice would be read, the feeder
    waits (state WAIT) and reads the last slice from the second cycle after the writer's last write.

    Members
    -------
    ctl : In(FeederSignature(rows, cols))
        From the matrix unit.
    a_rd : Out(SpReadSignature).array(rows)
        Scratchpad read port of array row ``i`` (``READ_LATENCY`` cycles): row ``i`` of A.
    b_rd : Out(SpReadSignature).array(cols)
        Scratchpad read port of array column ``j`` (``READ_LATENCY`` cycles): column ``j`` of Bop.
    vector_banks_next : In(sp_banks)
        The banks the vector lane (RQ, SM) asks port B for in the next cycle, one bit each, registered here
        beside the arbitration: an operand on one of them waits then (the vector lane's pipelines cannot).
    writer_banks : In(sp_banks)
        The bank the result writer asks port B for in this cycle (one bit, or none): an operand on it waits.
    writer_busy : In(1)
        The result writer has the previous tile's results still to write: the last slice waits.
    """

    def __init__(self, *, rows, cols, addr_width, banks, read_latency, row_b=False):
        self._rows, self._cols, self._addr_width, self._banks = rows, cols, addr_width, banks
        self._read_latency, self._row_b = read_latency, bool(row_b)
        super().__init__({"ctl": In(FeederSignature(rows, cols, self._row_b)),
                          **self.read_members(rows=rows, cols=cols, addr_width=addr_width, row_b=row_b),
                          "vector_banks_next": In(banks), "writer_banks": In(banks), "writer_busy": In(1)})

    @staticmethod
    def read_members(*, rows, cols, addr_width, row_b=False):
        """The signature members of the read ports (the matrix unit has the same)."""
        members = {"a_rd": Out(SpReadSignature(addr_width)).array(rows),
                   "b_rd": Out(SpReadSignature(addr_width)).array(cols)}
        if row_b and rows > 1:
            members["rb_rd"] = Out(SpReadSignature(addr_width)).array((rows - 1) * cols)
        return members

    @property
    def read_ports(self):
        return read_ports_of(self)

    def elaborate(self, platform):
        m = Module()
        ctl = self.ctl
        assert PLAN_CYCLES + DRAIN_CYCLES == STREAM_MM_OVERHEAD and DRAIN_CYCLES == MM_DRAIN_CYCLES, \
            "the cycle model's decoupled MM time is K + extra + STREAM_MM_OVERHEAD + M*N"
        assert PLAN_CYCLES == 2, "cycle 1 computes the first addresses, cycle 2 plans the first slice"
        assert READ_LATENCY == self._read_latency, \
            "the feeder waits for its operands as long as port B's reads take (ga2_sw.timing)"
        instr, ports, rows = ctl.instr, self.read_ports, self._rows
        n_ops, aw = len(ports), self._addr_width
        pairs = [(q, p) for p in range(n_ops) for q in range(p)]
        codes = (_ThermometerCounts if n_ops <= THERMOMETER_OPERANDS else _BinaryCounts)(n_ops)
        # the signals the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(pairs=pairs, ctl=ctl, instr=instr, ports=ports, rows=rows, cols=self._cols,
                            banks=self._banks, row_b=self._row_b, n_ops=n_ops, aw=aw, codes=codes,
                            indices=isinstance(codes, _BinaryCounts))
        self._operand_registers(m, s)
        self._bank_codes(m, s)
        self._reads(m, s)
        self._state_machine(m, s)
        self._slice_steps(m, s)
        self._hold_registers(m, s)
        return m

    def _operand_registers(self, m, s):
        """Each operand's first address, step and bank registers, the slice's bookkeeping (which operands it has
        read, its banks, the slices left), latched or computed from the fields at start."""
        # Operand p: its first address (A + i*lda, a constant multiply once per instruction; Bop(0, j) is j past
        # B, or j*ldb when B is stored transposed), its step per slice, and whether the MM uses it. The fields
        # are latched at start and the addresses computed from them in cycle 1.
        base_a, base_b = Signal.like(s.instr.A, name="base_a"), Signal.like(s.instr.B, name="base_b")
        lda, ldb, tb = Signal.like(s.instr.lda, name="lda"), Signal.like(s.instr.ldb, name="ldb"), Signal(name="tb")
        # row_b chips: row r's B starts r*lda words past B with rb, its operands after the columns'; with sa
        # every row takes row 0's A operand (rows 1..'s ports stay idle: `useds`)
        rb = Signal(name="rb") if s.row_b else None
        sa = Signal(name="sa") if s.row_b else None
        row_offsets = [times(lda, i) for i in range(s.rows)]
        column_firsts = [base_b + Mux(tb, times(ldb, j), j) for j in range(s.cols)]
        firsts = ([base_a + off for off in row_offsets] + column_firsts +
                  ([first + off for off in row_offsets[1:] for first in column_firsts] if s.row_b else []))
        addr = [Signal(s.aw, name=f"op{p}_addr") for p in range(s.n_ops)]      # the slice being read
        steps = [1] * s.rows + [s.ctl.fields.b_kstride] * (s.n_ops - s.rows)
        # The next slice's addresses and banks are registers too (`ahead`, `ahead_bank`), stepped with the slice:
        # so a new slice's plan (which operands share a bank, how many wait on each) is a few gates of registers,
        # not an adder, the bank adders and the counts behind the slice's end.
        ahead = [Signal(s.aw, name=f"op{p}_ahead") for p in range(s.n_ops)]
        nexts = [Signal(s.aw, name=f"op{p}_next") for p in range(s.n_ops)]     # the slice after `ahead`'s
        next_banks = [Signal(s.banks, name=f"op{p}_next_bank") for p in range(s.n_ops)]
        used = [Signal(name=f"op{p}_used") for p in range(s.n_ops)]
        # Which operands the slice being read has read already: operand p has when its bit equals `phase`,
        # which flips with every slice read, so a new slice needs no clearing of the bits (clearing them on the
        # slice's last read put the whole arbitration and the vector lane's banks in front of eight reset
        # inputs: 91.65 and 93.19 MHz on a 25F, two seeds of three).
        phase = Signal(name="slice_phase")
        read_in = [Signal(name=f"op{p}_read_in") for p in range(s.n_ops)]
        served = [~(r ^ phase) for r in read_in]
        same = {pq: Signal(name=f"op{pq[0]}_op{pq[1]}_same_bank") for pq in s.pairs}
        on_bank = [Signal(s.banks, name=f"op{p}_bank") for p in range(s.n_ops)]     # one bit per bank
        ahead_bank = [Signal(s.banks, name=f"op{p}_ahead_bank") for p in range(s.n_ops)]
        # Where the pairs compare the banks' indices, each one-hot bank has its index beside it.
        b = exact_log2(s.banks)
        next_index = [Signal(b, name=f"op{p}_next_index") for p in range(s.n_ops)] if s.indices else None
        ahead_index = [Signal(b, name=f"op{p}_ahead_index") for p in range(s.n_ops)] if s.indices else None
        # Slices still to read after the one being read, and whether it is the last (a register: the state
        # machine and the array's mark take it without a compare).
        left = Signal(16)
        on_last = Signal(name="on_last_slice")
        next_is_last = left == 1
        s.__dict__.update(rb=rb, sa=sa, firsts=firsts, addr=addr, steps=steps, ahead=ahead, nexts=nexts,
                          next_banks=next_banks, used=used, phase=phase, read_in=read_in, served=served,
                          same=same, on_bank=on_bank, ahead_bank=ahead_bank, next_index=next_index,
                          ahead_index=ahead_index, left=left, on_last=on_last,
                          next_is_last=next_is_last, base_a=base_a, base_b=base_b, lda=lda, ldb=ldb, tb=tb)

    def _bank_codes(self, m, s):
        """Per bank, how many of the slice's operands are still to read, as thermometer codes (END_COPIES
        copies, each its own loop), and the first slice's banks decoded beside its addresses."""
        # Per bank, how many of the slice's operands are still to read, as a thermometer code: `waiting[b][k]` is
        # high while more than k are. A read cycle reads one from each bank that has any and is not held, so a
        # bank's code shifts down by one then; and the slice is done when no bank has two waiting, or one
        # waiting on a held bank. The operands' own flags (`pending`, `reads`) say the same, but the slice's end
        # from them was every operand's bank and arbitration in a row, seven LUTs in front of the addresses'
        # and counters' enables (96.64 MHz on a 25F, one seed of three); from the codes it is four.
        # The slice's end enables about 450 registers; one copy of it, crossing the die to all of them, was the
        # worst path on two seeds of three (bank3_waiting -> its end -> bank1_waiting, 10.23 ns, 8.05 of routing;
        # bank7_waiting -> its end -> the state machine, 10.71 ns: 97.78 and 93.4 MHz on a 25F). So there are
        # END_COPIES copies of the codes, each its own loop (its end computed from its own codes, its codes
        # stepped by its own end, so no tool can merge them), and each copy's end enables one group of registers.
        copies = [[Signal(s.codes.shape, name=f"bank{b}_waiting" + (f"_copy{c}" if c else ""))
                   for b in range(s.banks)] for c in range(END_COPIES)]

        def bank_bit(address):
            return Const(1, s.banks) << bank_index(address, s.banks)

        # The first slice's banks, decoded in ADDRESS beside its addresses: decoded from the address registers
        # in PLAN, every copy's codes were loaded through the bank adders from 32 address bits fanned out
        # across the die (op0_addr -> bank7_waiting_copy1, 11.16 ns, 8.99 of routing: the AXI chip's worst path
        # on three seeds of three, 89.59 to 96.11 MHz on a 25F).
        first_banks = [Signal(s.banks, name=f"op{p}_first_bank") for p in range(s.n_ops)]
        first_index = ([Signal(exact_log2(s.banks), name=f"op{p}_first_index") for p in range(s.n_ops)]
                       if s.indices else None)

        def counts(hits, name):
            """Per bank, how many of the used operands on the banks ``hits`` (one bit each) sit on it."""
            return [s.codes.count(m, [u & h[b] for u, h in zip(s.used, hits)], f"{name}_bank{b}")
                    for b in range(s.banks)]

        def plan(hits, indices):
            """The slice whose operands sit on the banks ``hits`` (one-hot; ``indices``, their indices where the
            pairs compare those) becomes the one being read (its codes apart)."""
            same = ([indices[q] == indices[p] for q, p in s.pairs] if s.indices else
                    [(hits[q] & hits[p]).any() for q, p in s.pairs])
            return ([s.same[pair].eq(x) for pair, x in zip(s.pairs, same)] +
                    [hit.eq(h) for hit, h in zip(s.on_bank, hits)])
        s.__dict__.update(bank_bit=bank_bit, counts=counts, plan=plan, copies=copies, first_banks=first_banks,
                          first_index=first_index)

    def _reads(self, m, s):
        """This cycle's reads: each operand still to read unless an earlier one shares its bank or the vector
        lane or the result writer holds it; each copy's end of the slice."""
        # This cycle's reads: each operand still to read, unless an earlier one still to read shares its bank, or
        # the vector lane or the result writer asks for its bank.
        vector_banks = Signal(s.banks, name="vector_banks")
        m.d.sync += vector_banks.eq(self.vector_banks_next)
        held = vector_banks | self.writer_banks
        pending = [u & ~done for u, done in zip(s.used, s.served)]
        free = [~(hit & held).any() for hit in s.on_bank]
        reads = [pending[p] & free[p] & ~Cat(*(pending[q] & s.same[q, p] for q in range(p))).any()
                 for p in range(s.n_ops)]
        ends = [~Cat(*(s.codes.several(code) | (s.codes.some(code) & held[b]) for b, code in enumerate(waiting))).any()
                for waiting in s.copies]
        # Each copy's end, and the registers it enables: the state machine and the slice count; the slices'
        # addresses; the next slice's; its banks and the plan.
        slice_done, addr_end, ahead_end, plan_end = ends
        s.__dict__.update(held=held, reads=reads, ends=ends, slice_done=slice_done, addr_end=addr_end,
                          ahead_end=ahead_end, plan_end=plan_end)

    def _state_machine(self, m, s):
        """The state machine (IDLE, ADDRESS, PLAN, READ, drain) and the PLAN and READ registers beside it."""
        # PLAN and READ are also registers of their own, set and cleared with the state machine's transitions:
        # they select and enable the codes, the addresses and the plan, hundreds of registers, and decoded from
        # the state register they were the worst path of 25F seeds (the state -> the codes, 10.0 to 11.0 ns).
        planning, reading = Signal(name="planning"), Signal(name="reading")
        with m.FSM(name="stream_fsm") as fsm:
            with m.State("IDLE"):
                with m.If(s.ctl.start):
                    m.next = "ADDRESS"
            with m.State("ADDRESS"):
                m.d.sync += [*(a.eq(f) for a, f in zip(s.addr, s.firsts)),
                             *(h.eq(s.bank_bit(f)) for h, f in zip(s.first_banks, s.firsts)), planning.eq(1)]
                if s.indices:
                    m.d.sync += [i.eq(bank_index(f, s.banks)) for i, f in zip(s.first_index, s.firsts)]
                m.next = "PLAN"
            # The last slice waits in WAIT while the result writer is busy, entered from the cycle before it
            # would be read: a state, so that the wait is not one more term of every read's arbitration.
            with m.State("PLAN"):
                m.d.sync += [*s.plan(s.first_banks, s.first_index), *(a.eq(n) for a, n in zip(s.ahead, s.nexts)),
                             *(code.eq(count) for waiting in s.copies
                               for code, count in zip(waiting, s.counts(s.first_banks, "first"))),
                             *(h.eq(n) for h, n in zip(s.ahead_bank, s.next_banks)), planning.eq(0)]
                if s.indices:
                    m.d.sync += [i.eq(n) for i, n in zip(s.ahead_index, s.next_index)]
                with m.If(s.on_last & self.writer_busy):
                    m.next = "WAIT"
                with m.Else():
                    m.next = "READ"
                    m.d.sync += reading.eq(1)
            with m.State("READ"):
                with m.If(s.slice_done & s.on_last):
                    m.d.comb += s.ctl.done.eq(1)
                    m.next = "IDLE"
                    m.d.sync += reading.eq(0)
                with m.Elif(s.slice_done & s.next_is_last & self.writer_busy):
                    m.next = "WAIT"
                    m.d.sync += reading.eq(0)
            with m.State("WAIT"):
                with m.If(~self.writer_busy):
                    m.next = "READ"
                    m.d.sync += reading.eq(1)
        s.__dict__.update(planning=planning, reading=reading, fsm=fsm)

    def _slice_steps(self, m, s):
        """The slices stepped: the addresses, the next slice's addresses and banks, the plan, and each copy's
        codes stepped by its own end."""
        # In PLAN the slice after the first is the first's addresses stepped, later the one after `ahead`'s.
        for a, h, base, ah, step in zip(s.nexts, s.next_banks, s.addr, s.ahead, s.steps):
            m.d.comb += [a.eq(Mux(s.planning, base, ah) + step), h.eq(s.bank_bit(a))]
        if s.indices:
            m.d.comb += [i.eq(bank_index(a, s.banks)) for i, a in zip(s.next_index, s.nexts)]
        slice_read = s.reading & s.slice_done
        # Idle, the fields follow the instruction, which holds still in the start cycle: `start` (the end of
        # the sequencer's issue decision) then drives only the state machine.
        with m.If(s.fsm.ongoing("IDLE")):
            m.d.sync += [s.base_a.eq(s.instr.A), s.base_b.eq(s.instr.B), s.lda.eq(s.instr.lda), s.ldb.eq(s.instr.ldb),
                         s.tb.eq(s.instr.tb), *(u.eq(f) for u, f in zip(s.used, useds(s.instr, rows=s.rows, cols=s.cols, row_b=s.row_b))),
                         s.left.eq(s.instr.K - 1), s.on_last.eq(s.instr.K == 1)]
            if s.row_b:
                m.d.sync += [s.rb.eq(optional_field(s.instr, "rb")), s.sa.eq(optional_field(s.instr, "sa"))]
        with m.Elif(slice_read):
            m.d.sync += [s.left.eq(s.left - 1), s.on_last.eq(s.next_is_last)]
        with m.If(s.reading & s.addr_end):
            m.d.sync += [a.eq(n) for a, n in zip(s.addr, s.ahead)]
        with m.If(s.reading & s.ahead_end):
            m.d.sync += [a.eq(n) for a, n in zip(s.ahead, s.nexts)]
        with m.If(s.reading & s.plan_end):
            m.d.sync += [*s.plan(s.ahead_bank, s.ahead_index), *(h.eq(n) for h, n in zip(s.ahead_bank, s.next_banks))]
            if s.indices:
                m.d.sync += [i.eq(n) for i, n in zip(s.ahead_index, s.next_index)]
        # Each copy's codes, stepped by its own end: the next slice's counts, else one read from each bank that is
        # not held.
        ahead_counts = s.counts(s.ahead_bank, "ahead")
        for waiting, end in zip(s.copies, s.ends):
            with m.If(s.reading & end):
                m.d.sync += [code.eq(count) for code, count in zip(waiting, ahead_counts)]
            with m.Elif(s.reading):
                m.d.sync += [code.eq(Mux(s.held[b], code, s.codes.less_one(code))) for b, code in enumerate(waiting)]
        with m.If(s.reading):
            m.d.sync += s.phase.eq(s.phase ^ s.slice_done)
            for bit, rd in zip(s.read_in, s.reads):
                with m.If(rd):
                    m.d.sync += bit.eq(s.phase)
        with m.Else():                          # outside READ every operand is still to read
            m.d.sync += [bit.eq(~s.phase) for bit in s.read_in]
        for p, port in enumerate(s.ports):
            m.d.comb += [port.addr.eq(s.addr[p]), port.en.eq(s.reading & s.reads[p])]
        s.__dict__.update(slice_read=slice_read)

    def _hold_registers(self, m, s):
        """The hold registers between the RAM outputs and the multipliers; the slice goes to the array with its
        mark STEP_DELAY cycles after its last read."""
        # Hold registers (the array's operands) between the RAM outputs (slow clock-to-output) and the
        # multipliers: an operand is taken in the cycle its data arrives. The array takes them as a slice, with
        # its mark, STEP_DELAY cycles after the slice's last read; in the other cycles it sees a bubble.
        arrived = [delayed(m, port.en, READ_LATENCY, f"op{p}_arrived") for p, port in enumerate(s.ports)]
        for got, port, hold in zip(arrived, s.ports, [*s.ctl.a, *s.ctl.b]):
            with m.If(got):
                m.d.sync += hold.eq(port.data[0:8].as_signed())
        if len(s.ctl.b) > s.cols:
            # A row_b chip's array takes a B operand per cell (TiledSystolicArray(per_cell_b=True)): without
            # rb, every row's cell of column j takes column j's operand, as it would flowing down the column.
            cols = s.cols
            shared = [delayed(m, port.en & ~s.rb, READ_LATENCY, f"col{j}_shared") for j, port in enumerate(self.b_rd)]
            for r in range(1, s.rows):
                for j in range(cols):
                    with m.If(shared[j]):
                        m.d.sync += s.ctl.b[r * cols + j].eq(self.b_rd[j].data[0:8].as_signed())
            # With sa, row 0's A operand is every row's.
            a_shared = delayed(m, self.a_rd[0].en & s.sa, READ_LATENCY, "row0_a_shared")
            with m.If(a_shared):
                m.d.sync += [s.ctl.a[r].eq(self.a_rd[0].data[0:8].as_signed()) for r in range(1, s.rows)]
        m.d.comb += [s.ctl.step.eq(delayed(m, s.slice_read, STEP_DELAY, "step_now")),
                     s.ctl.last.eq(delayed(m, s.slice_read & s.on_last, STEP_DELAY, "last_step"))]


class _ThermometerCounts:
    """Per-bank counts as thermometer codes, ``code[k]`` high while more than ``k`` operands wait: a read takes one
    off by a shift."""

    def __init__(self, n_ops):
        self.shape = n_ops

    @staticmethod
    def count(m, bits, name):
        return thermometer(m, bits, name)

    @staticmethod
    def some(code):
        return code[0]

    @staticmethod
    def several(code):
        return code[1]

    @staticmethod
    def less_one(code):
        return code[1:]


class _BinaryCounts:
    """Per-bank counts as binary numbers: a read takes one off by a decrement (none off an empty bank)."""

    def __init__(self, n_ops):
        self.shape = range(n_ops + 1)

    @staticmethod
    def count(m, bits, name):
        return popcount(m, bits, name)

    @staticmethod
    def some(code):
        return code.any()

    @staticmethod
    def several(code):
        return code[1:].any()

    @staticmethod
    def less_one(code):
        return Mux(code.any(), code - 1, 0)


def times(value, n):
    """``value * n`` for a constant ``n >= 0`` as a sum of shifted copies of ``value``: written as a product, Yosys
    maps it onto a MULT18X18D, whose delay made the first operand addresses the decoupled chip's critical path
    (83.98 MHz on a 45F: `ldb` -> the DSP -> the adder -> `op7_addr`)."""
    terms = [value << k for k in range(n.bit_length()) if n >> k & 1]
    out = Const(0, 1)
    for term in terms:
        out = out + term
    return out


def thermometer(m, bits, name):
    """``out[k]`` = more than ``k`` of ``bits`` are set: the count of ``bits`` as a thermometer code, through a
    tree of merges (log2(n) levels, each a signal: as one expression it grows with every level it nests)."""
    def merge(x, y):        # the code of both halves': more than k when more than i in x and k - 1 - i in y
        def more(code, i):  # more than i set in code (always for i < 0, never beyond it)
            return Const(1, 1) if i < 0 else code[i] if i < len(code) else Const(0, 1)
        out = Signal(len(x) + len(y), name=f"{name}_{len(x)}_{len(y)}")
        m.d.comb += out.eq(Cat(*(or_all([more(x, i) & more(y, k - 1 - i) for i in range(-1, k + 1)])
                                 for k in range(len(out)))))
        return out
    codes = [Cat(bit) for bit in bits]
    while len(codes) > 1:
        codes = [merge(*codes[i:i + 2]) if i + 1 < len(codes) else codes[i] for i in range(0, len(codes), 2)]
    return codes[0]


def popcount(m, bits, name):
    """The number of ``bits`` set, in binary: each group of four counted by a gate or two (a LUT4 a bit), the
    groups' counts added in a tree whose levels are signals."""
    def count4(group):
        if len(group) == 1:
            return 1, Cat(group[0])
        pairs = [(x ^ y, x & y) for x, y in zip(group[::2], group[1::2])]
        if len(group) % 2:
            pairs.append((group[-1], Const(0, 1)))
        if len(pairs) == 1:
            return len(group), Cat(*pairs[0])
        (s1, c1), (s2, c2) = pairs             # (s1 + s2) + 2 (c1 + c2): c1 and s1 are never both set
        return len(group), Cat(s1 ^ s2, (s1 & s2) ^ c1 ^ c2, c1 & c2)
    nodes = [count4(bits[i:i + 4]) for i in range(0, len(bits), 4)]
    level = 0
    while len(nodes) > 1:
        merged = []
        for i in range(0, len(nodes) - 1, 2):
            (n1, x), (n2, y) = nodes[i], nodes[i + 1]
            out = Signal(range(n1 + n2 + 1), name=f"{name}_{level}_{i // 2}")
            m.d.comb += out.eq(x + y)
            merged.append((n1 + n2, out))
        nodes = merged + nodes[len(merged) * 2:]
        level += 1
    return nodes[0][1]


def useds(instr, *, rows, cols, row_b):
    """Whether the MM uses each operand port: rows ``i < M`` (row_b chips: with ``sa`` row 0 alone), then
    columns ``j < N``, then (row_b chips) with ``rb`` row ``i``'s column ``j`` for ``1 <= i < M``, ``j < N``."""
    rows_b = ([optional_field(instr, "rb") & (instr.M > i) & (instr.N > j)
               for i in range(1, rows) for j in range(cols)] if row_b else [])
    rows_a = [instr.M > i for i in range(rows)]
    if row_b:
        rows_a[1:] = [used & ~optional_field(instr, "sa") for used in rows_a[1:]]
    return rows_a + [instr.N > j for j in range(cols)] + rows_b


def read_ports_of(unit):
    """The streaming feeder's read ports (of ``unit``: the feeder or the matrix unit, which mirrors them) in
    operand order (``ga2_sw.banking.slice_addresses``): A's rows, B's columns, then (row_b chips) rows 1.. of B's
    per-row operands."""
    return [*unit.a_rd, *unit.b_rd, *(unit.rb_rd if "rb_rd" in unit.signature.members else ())]
