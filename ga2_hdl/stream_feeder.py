"""The matrix unit's streaming operand feeder (decoupled mode): a k-slice per cycle where its operands sit on
distinct banks, through one scratchpad read port per array row and one per array column."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.timing import (BANKED_DATA_DELAY, BANKED_READ_DELAY, BANKED_SELECT_DELAY, MM_DRAIN_CYCLES,
                           MM_PLAN_CYCLES, STREAM_MM_OVERHEAD, compute_read_latency)

from .banked_scratchpad import bank_index
from .feeder import FeederSignature
from .ports import SpReadSignature, check_config, sp_addr_width
from .valid_chain import delayed

__all__ = ["StreamFeeder"]

# Cycle 1 computes the first slice's addresses from the fields latched at start, and cycle 2 plans the slice:
# which of its operands share a bank. (Planning it in the start cycle itself put the sequencer's instruction,
# the operand address adders, the bank adders and their compares in one path: 63 MHz on ECP5; computing the
# addresses there, the instruction bus's routes across the die and the adders were the next, 83 MHz on a 45F.)
PLAN_CYCLES = MM_PLAN_CYCLES
# The cycles from an operand's read request to its data: the scratchpad's request register, the read, the
# bank's data register and the select register.
READ_LATENCY = BANKED_READ_DELAY + 1 + BANKED_DATA_DELAY + BANKED_SELECT_DELAY
# The cycles from the read request of the last slice's last operands (cycle c) to done: their data arrives in the
# hold registers (c + READ_LATENCY), the array takes the slice's step (c + READ_LATENCY + 1), and PE(0,0)
# accumulates its last product (c + READ_LATENCY + 2). With the plan cycle, the cycle model counts these as
# STREAM_MM_OVERHEAD.
DRAIN_CYCLES = READ_LATENCY + 2


class StreamFeeder(wiring.Component):
    """Feeds an MM to the ``rows`` x ``cols`` array one k-slice at a time: row ``i``'s port reads ``A[i][k]`` and
    column ``j``'s port ``Bop(k, j)``, each operand through its own scratchpad read port.

    The decoupled scratchpad is banked (``ga2_sw.banking``) and serves one read per bank per cycle, so a slice
    whose operands share banks is read over several cycles: in each cycle every operand not yet read is read
    unless an earlier one (in the order ``A[0..M)``, ``Bop[0..N)``) not yet read is on its bank. So the operand
    with ``r`` earlier operands on its bank is read in the slice's cycle ``r``, and the slice takes as many
    cycles as the most operands on one bank (``ga2_sw.banking.slice_rounds``). The vector lane shares port B
    and has it first: an operand whose bank it asks for in a cycle waits a cycle (``vector_banks``;
    ``ga2_sw.cycles.mm_last_cycle`` is this rule in the cycle model). Which operands share a bank is
    registered with the slice's addresses (computed from the next addresses while the slice before is read),
    so a read cycle holds only registers, a few gates and the scratchpad's routing.

    Schedule, with ``start`` in cycle 0:

    * cycle 1: the array is cleared and the first slice's addresses computed from the latched fields; cycle 2:
      the first slice planned (which of its operands share a bank); from cycle 3 on the slices are read,
      slice after slice (``K + extra`` cycles,
      ``extra = ga2_sw.banking.mm_extra_cycles``); the other ports stay disabled.
    * an operand is registered into its hold register in the cycle its data arrives, ``READ_LATENCY`` cycles
      after its read request (the banked scratchpad registers compute-lane requests and the banks' data);
      the array takes slice ``k``'s step from the hold registers ``READ_LATENCY + 1`` cycles after the slice's
      last read request, and stands still in the other cycles (hold registers of rows ``>= M`` and columns
      ``>= N`` stay zero).
    * after the last slice's step the hold registers are zeroed and the array steps every cycle: PE(0,0)
      completes its sum in the next step, ``done``, ``DRAIN_CYCLES`` after the last read request, in cycle
      ``F = K + extra + STREAM_MM_OVERHEAD`` (``PLAN_CYCLES + DRAIN_CYCLES``).

    The results are written from cycle ``F + 1`` on, while the array keeps stepping with zero inputs (which
    leaves finished sums alone): (i, j) in cycle ``F + 1 + i*N + j``, after its PE completed it. Every operand
    has been read by then, so a destination that overlaps the operands gets the product of their old values.

    Members
    -------
    ctl : In(FeederSignature(rows, cols))
        From the matrix unit.
    a_rd : Out(SpReadSignature).array(rows)
        Scratchpad read port of array row ``i`` (``READ_LATENCY`` cycles): row ``i`` of A.
    b_rd : Out(SpReadSignature).array(cols)
        Scratchpad read port of array column ``j`` (``READ_LATENCY`` cycles): column ``j`` of Bop.
    vector_banks : In(sp_banks)
        The banks the vector lane (RQ, SM) asks port B for in this cycle, one bit each: an operand on one of
        them waits (the vector lane's pipelines cannot).
    """

    def __init__(self, config):
        self._config = check_config(config)
        super().__init__({"ctl": In(FeederSignature(config.rows, config.cols)), **self.read_members(config),
                          "vector_banks": In(config.sp_banks)})

    @staticmethod
    def read_members(config):
        """The signature members of the read ports (the matrix unit has the same)."""
        aw = sp_addr_width(config)
        return {"a_rd": Out(SpReadSignature(aw)).array(config.rows),
                "b_rd": Out(SpReadSignature(aw)).array(config.cols)}

    @property
    def read_ports(self):
        return [*self.a_rd, *self.b_rd]

    def elaborate(self, platform):
        m = Module()
        ctl, config = self.ctl, self._config
        assert PLAN_CYCLES + DRAIN_CYCLES == STREAM_MM_OVERHEAD and DRAIN_CYCLES == MM_DRAIN_CYCLES, \
            "the cycle model's decoupled MM time is K + extra + STREAM_MM_OVERHEAD + M*N"
        assert PLAN_CYCLES == 2, "cycle 1 computes the first addresses, cycle 2 plans the first slice"
        assert READ_LATENCY == compute_read_latency(config), \
            "the feeder waits for its operands as long as port B's reads take (ga2_sw.timing)"
        instr, ports, rows = ctl.instr, self.read_ports, config.rows
        n_ops, aw = len(ports), sp_addr_width(config)
        pairs = [(q, p) for p in range(n_ops) for q in range(p)]
        # Operand p: its first address (A + i*lda, a constant multiply once per instruction; Bop(0, j) is j past
        # B, or j*ldb when B is stored transposed), its step per slice, and whether the MM uses it. The fields
        # are latched at start and the addresses computed from them in cycle 1.
        base_a, base_b = Signal.like(instr.A, name="base_a"), Signal.like(instr.B, name="base_b")
        lda, ldb, tb = Signal.like(instr.lda, name="lda"), Signal.like(instr.ldb, name="ldb"), Signal(name="tb")
        firsts = ([base_a + times(lda, i) for i in range(rows)] +
                  [base_b + Mux(tb, times(ldb, j), j) for j in range(config.cols)])
        addr = [Signal(aw, name=f"op{p}_addr") for p in range(n_ops)]      # the slice being read
        nexts = [a + s for a, s in zip(addr, [1] * rows + [ctl.fields.b_kstride] * config.cols)]
        used = [Signal(name=f"op{p}_used") for p in range(n_ops)]
        # Which operands the slice being read has read already: operand p has when its bit equals `phase`,
        # which flips with every slice read, so a new slice needs no clearing of the bits (clearing them on the
        # slice's last read put the whole arbitration and the vector lane's banks in front of eight reset
        # inputs: 91.65 and 93.19 MHz on a 25F, two seeds of three).
        phase = Signal(name="slice_phase")
        read_in = [Signal(name=f"op{p}_read_in") for p in range(n_ops)]
        served = [~(r ^ phase) for r in read_in]
        same = {pq: Signal(name=f"op{pq[0]}_op{pq[1]}_same_bank") for pq in pairs}
        on_bank = [Signal(config.sp_banks, name=f"op{p}_bank") for p in range(n_ops)]     # one bit per bank
        slices = Signal(16)

        def same_banks(addresses):
            banks = [bank_index(a, config) for a in addresses]
            return ([same[q, p].eq(banks[q] == banks[p]) for q, p in pairs] +
                    [hit.eq(Const(1, config.sp_banks) << bank) for hit, bank in zip(on_bank, banks)])

        # This cycle's reads: each operand still to read, unless an earlier one still to read shares its bank or
        # the vector lane asks for its bank.
        pending = [u & ~s for u, s in zip(used, served)]
        free = [~(hit & self.vector_banks).any() for hit in on_bank]
        reads = [pending[p] & free[p] & ~Cat(*(pending[q] & same[q, p] for q in range(p))).any()
                 for p in range(n_ops)]
        slice_done = Cat(*(~pend | rd for pend, rd in zip(pending, reads))).all()
        last_slice = slices == ctl.fields.k_last

        with m.FSM(name="stream_fsm") as fsm:
            with m.State("IDLE"):
                with m.If(ctl.start):
                    m.next = "ADDRESS"
            with m.State("ADDRESS"):
                m.d.sync += [a.eq(f) for a, f in zip(addr, firsts)]
                m.next = "PLAN"
            with m.State("PLAN"):
                m.d.sync += same_banks(addr)
                m.next = "READ"
            with m.State("READ"):
                with m.If(slice_done & last_slice):
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                drain = Signal(range(DRAIN_CYCLES))
                with m.If(drain == DRAIN_CYCLES - 1):
                    m.d.comb += ctl.done.eq(1)
                    m.d.sync += drain.eq(0)
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += drain.eq(drain + 1)

        reading = fsm.ongoing("READ")
        slice_read = reading & slice_done
        # Idle, the fields follow the instruction, which holds still in the start cycle: `start` (the end of
        # the sequencer's issue decision) then drives only the state machine.
        with m.If(fsm.ongoing("IDLE")):
            m.d.sync += [base_a.eq(instr.A), base_b.eq(instr.B), lda.eq(instr.lda), ldb.eq(instr.ldb),
                         tb.eq(instr.tb), *(u.eq(f) for u, f in zip(used, useds(instr, config))), slices.eq(0)]
        with m.Elif(slice_read):
            m.d.sync += [*(a.eq(n) for a, n in zip(addr, nexts)), slices.eq(slices + 1), *same_banks(nexts)]
        with m.If(reading):
            m.d.sync += phase.eq(phase ^ slice_done)
            for bit, rd in zip(read_in, reads):
                with m.If(rd):
                    m.d.sync += bit.eq(phase)
        with m.Else():                          # outside READ every operand is still to read
            m.d.sync += [bit.eq(~phase) for bit in read_in]
        for p, port in enumerate(ports):
            m.d.comb += [port.addr.eq(addr[p]), port.en.eq(reading & reads[p])]

        # Hold registers (the array's operands) between the RAM outputs (slow clock-to-output) and the
        # multipliers: an operand is taken in the cycle its data arrives, and all are zeroed at the clear and
        # after the last slice's step, so that unused rows and columns, and the flush steps, see zeros.
        arrived = [delayed(m, port.en, READ_LATENCY, f"op{p}_arrived") for p, port in enumerate(ports)]
        step_now = delayed(m, slice_read, READ_LATENCY + 1, "step_now")
        last_step = delayed(m, slice_read & last_slice, READ_LATENCY + 1, "last_step")
        for got, port, hold in zip(arrived, ports, [*ctl.a, *ctl.b]):
            with m.If(ctl.clear | last_step):
                m.d.sync += hold.eq(0)
            with m.Elif(got):
                m.d.sync += hold.eq(port.data[0:8].as_signed())

        # The array steps on each complete slice, then every cycle from the last slice's step on (the unit
        # keeps it stepping while the results are written).
        flushing = Signal()
        with m.If(ctl.start):
            m.d.sync += flushing.eq(0)
        with m.Elif(last_step):
            m.d.sync += flushing.eq(1)
        m.d.comb += ctl.step.eq(step_now | flushing & fsm.ongoing("DRAIN"))
        return m


def times(value, n):
    """``value * n`` for a constant ``n >= 0`` as a sum of shifted copies of ``value``: written as a product, Yosys
    maps it onto a MULT18X18D, whose delay made the first operand addresses the decoupled chip's critical path
    (83.98 MHz on a 45F: `ldb` -> the DSP -> the adder -> `op7_addr`)."""
    terms = [value << k for k in range(n.bit_length()) if n >> k & 1]
    out = Const(0, 1)
    for term in terms:
        out = out + term
    return out


def useds(instr, config):
    """Whether the MM uses each operand port: rows ``i < M``, then columns ``j < N``."""
    return [instr.M > i for i in range(config.rows)] + [instr.N > j for j in range(config.cols)]
