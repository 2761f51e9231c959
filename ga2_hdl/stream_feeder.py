"""The matrix unit's streaming operand feeder (decoupled mode): a whole k-slice per cycle, through one scratchpad
read port per array row and one per array column."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.timing import STREAM_MM_OVERHEAD

from .feeder import FeederSignature
from .ports import SpReadSignature, check_config, sp_addr_width

__all__ = ["StreamFeeder"]

# The cycles from the last slice's read (cycle K) to the first write: the slice arrives (K + 1), steps the array
# from the hold registers (K + 2), and PE(0,0) accumulates its last product (K + 3). The cycle model counts them
# as STREAM_MM_OVERHEAD.
FLUSH_CYCLES = 3


class StreamFeeder(wiring.Component):
    """Feeds an MM to the ``rows`` x ``cols`` array one k-slice per cycle: row ``i``'s port reads ``A[i][k]``
    and column ``j``'s port ``Bop(k, j)``.

    Schedule, with ``start`` in cycle 0:

    * cycles ``1 .. K``: slice ``k = cycle - 1`` is read, ``A[i][k]`` on ``a_rd[i]`` (``i < M``) and
      ``Bop(k, j)`` on ``b_rd[j]`` (``j < N``); the other ports stay disabled. The array is cleared in cycle 1.
    * cycle ``k + 2``: slice ``k`` arrives and is registered into the hold registers (zero for rows ``>= M``
      and columns ``>= N``, and in every cycle without an arriving slice).
    * cycles ``3 .. K + 3``: the array steps; step ``k`` (cycle ``3 + k``) takes slice ``k`` from the hold
      registers, and the steps from ``K`` on feed zeros. PE(r, c) completes its sum with the accumulate of step
      ``K + r + c`` (cycle ``K + 3 + r + c``): PE(0,0) in cycle ``K + 3``, which is ``done``.

    The results are written from cycle ``K + 4`` on, while the array keeps stepping with zero inputs (which
    leaves finished sums alone): (i, j) in cycle ``K + 4 + i*N + j``, after its PE completed it. Every operand
    has been read by then, so a destination that overlaps the operands gets the product of their old values.

    Members
    -------
    ctl : In(FeederSignature(rows, cols))
        From the matrix unit.
    a_rd : Out(SpReadSignature).array(rows)
        Scratchpad read port of array row ``i`` (1-cycle latency): row ``i`` of A.
    b_rd : Out(SpReadSignature).array(cols)
        Scratchpad read port of array column ``j`` (1-cycle latency): column ``j`` of Bop.
    """

    def __init__(self, config):
        self._config = check_config(config)
        super().__init__({"ctl": In(FeederSignature(config.rows, config.cols)), **self.read_members(config)})

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
        ctl = self.ctl
        assert FLUSH_CYCLES == STREAM_MM_OVERHEAD, "the cycle model's decoupled MM time is K + 3 + M*N"

        rd_k = Signal(16)             # slice being read
        flush_cnt = Signal(range(FLUSH_CYCLES))
        with m.FSM(name="stream_fsm") as fsm:
            with m.State("IDLE"):
                with m.If(ctl.start):
                    m.d.sync += [rd_k.eq(0), flush_cnt.eq(0)]
                    m.next = "READ"
            with m.State("READ"):
                m.d.sync += rd_k.eq(rd_k + 1)
                with m.If(rd_k == ctl.fields.k_last):
                    m.next = "FLUSH"
            with m.State("FLUSH"):
                with m.If(flush_cnt == FLUSH_CYCLES - 1):
                    m.d.comb += ctl.done.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += flush_cnt.eq(flush_cnt + 1)

        # Each port's address is a register, stepped by an adder (none between it and the RAM). The hold
        # registers (the array's operands) sit between the RAM outputs (slow clock-to-output) and the
        # multipliers. A disabled read port keeps its old data, so a port's data is taken only when it was
        # enabled in the previous cycle; otherwise the hold register loads zero. That zeroes rows >= M and
        # columns >= N and feeds the steps from K on with zeros.
        instr, reading, arrives = ctl.instr, fsm.ongoing("READ"), Signal()
        m.d.sync += arrives.eq(reading)
        for i, port in enumerate(self.a_rd):
            # Along row i of A: from A + i*lda (a constant multiply, once per instruction), stride 1.
            used = self._read_port(m, port, f"a{i}", instr.A + i * instr.lda, instr.M > i, 1, reading)
            m.d.sync += ctl.a[i].eq(Mux(arrives & used, port.data[0:8].as_signed(), 0))
        for j, port in enumerate(self.b_rd):
            # Down column j of Bop: from Bop(0, j), which is j past B, or j*ldb when B is stored transposed.
            first = instr.B + Mux(instr.tb, j * instr.ldb, j)
            used = self._read_port(m, port, f"b{j}", first, instr.N > j, ctl.fields.b_kstride, reading)
            m.d.sync += ctl.b[j].eq(Mux(arrives & used, port.data[0:8].as_signed(), 0))

        # Step 0 is in cycle 3, when slice 0 is held: the clear (cycle 1) and cycle 2 have no step.
        after_clear = Signal()
        m.d.sync += after_clear.eq(ctl.clear)
        m.d.comb += ctl.step.eq(~fsm.ongoing("IDLE") & ~ctl.clear & ~after_clear)
        return m

    def _read_port(self, m, port, name, first, used, stride, reading):
        """Drive ``port`` while ``reading``: from address ``first`` (taken at start) on, ``stride`` further each
        cycle, enabled only if ``used`` (at start). Returns the latched ``used``."""
        addr = Signal(sp_addr_width(self._config), name=f"{name}_addr")
        en = Signal(name=f"{name}_en")
        with m.If(self.ctl.start):
            m.d.sync += [addr.eq(first), en.eq(used)]
        with m.Elif(reading):
            m.d.sync += addr.eq(addr + stride)
        m.d.comb += [port.en.eq(reading & en), port.addr.eq(addr)]
        return en
