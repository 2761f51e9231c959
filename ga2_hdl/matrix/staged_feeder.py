"""The matrix unit's staged operand feeder (in-order mode): one operand word per cycle through one scratchpad read
port, gathered into hold registers until a whole k-slice can step the array."""

from collections import namedtuple

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .feeder import FeederSignature, b_strides
from ..ports import SpReadSignature

__all__ = ["StagedFeeder"]

_Walk = namedtuple("_Walk", "is_a idx slice_end last_slice_end")


class StagedFeeder(wiring.Component):
    """Feeds an MM to the ``rows`` x ``cols`` array through one read port, one word per cycle, in k-slices: slice
    ``k`` is ``A[0][k] .. A[M-1][k]`` then ``Bop(k, 0) .. Bop(k, N-1)``, ``M + N`` words.

    Schedule, with ``start`` in cycle 0:

    * cycles ``1 .. K*(M+N)``: the reads, back to back. Element ``e`` of slice ``k`` is read in cycle
      ``1 + k*(M+N) + e`` and arrives the cycle after, into its hold register. The hold registers are zeroed in
      cycle 1 (with the array), so rows ``>= M`` and columns ``>= N`` are fed zeros.
    * cycle ``(k+1)*(M+N) + 2``: array step ``k``, from the hold registers only (the cycle after the slice's last
      element arrived): no path runs from the RAM's slow clock-to-output into a multiplier.
    * cycle ``K*(M+N) + 2``, step ``K-1``: the hold registers are zeroed again, so the steps after it feed zeros.
    * cycles ``K*(M+N) + 3 .. (K+1)*(M+N)``: ``M + N - 2`` flush steps; ``done`` in cycle ``(K+1)*(M+N)``.

    PE(M-1, N-1) needs ``M + N - 1`` flush steps (``K + M + N - 1`` steps in all, see
    :class:`~ga2_hdl.matrix.systolic.SystolicArray`): the last one falls in the first write cycle, ``(K+1)*(M+N) + 1``,
    which writes PE(0,0). PE(0,0) finished ``M + N - 2`` steps earlier, except for ``M = N = 1``, where the
    first write cycle is also PE(0,0)'s last accumulate: ``pe00_late``.

    Members
    -------
    ctl : In(FeederSignature(rows, cols))
        From the matrix unit.
    sp_rd : Out(SpReadSignature)
        Scratchpad read port (1-cycle latency), ``addr_width`` bits of address.
    """

    def __init__(self, *, rows, cols, addr_width):
        self._rows, self._cols, self._addr_width = rows, cols, addr_width
        super().__init__({"ctl": In(FeederSignature(rows, cols)), **self.read_members(addr_width=addr_width)})

    @staticmethod
    def read_members(*, addr_width):
        """The signature members of the read ports (the matrix unit has the same)."""
        return {"sp_rd": Out(SpReadSignature(addr_width))}

    @property
    def read_ports(self):
        return [self.sp_rd]

    def elaborate(self, platform):
        m = Module()
        ctl, instr = self.ctl, self.ctl.instr

        # Fields only this schedule needs, latched at start like the unit's.
        lda = Signal(12)
        b_estride = Signal(12)        # address step from Bop(k, j) to Bop(k, j+1): 1, or ldb when tb
        mn_last = Signal(9)           # M + N - 1: the flush state lasts M + N cycles
        single = Signal()             # M = N = 1
        with m.If(ctl.start):
            m.d.sync += [lda.eq(instr.lda), b_estride.eq(b_strides(instr)[0]),
                         mn_last.eq(instr.M + instr.N - 1), single.eq((instr.M == 1) & (instr.N == 1))]

        reading = Signal()
        walk = self._read_walk(m, reading, lda, b_estride)
        flush_cnt = Signal(9)

        with m.FSM(name="staged_fsm") as fsm:
            with m.State("IDLE"):
                with m.If(ctl.start):
                    m.d.sync += flush_cnt.eq(0)
                    m.next = "READ"

            with m.State("READ"):
                m.d.comb += reading.eq(1)
                with m.If(walk.last_slice_end):
                    m.next = "FLUSH"

            with m.State("FLUSH"):
                # M + N cycles: the last element arrives, step K-1, then M + N - 2 flush steps; the last
                # flush step is left to the first write cycle.
                with m.If(flush_cnt == mn_last):
                    m.d.comb += ctl.done.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += flush_cnt.eq(flush_cnt + 1)

        slice_held = self._hold_slices(m, reading, walk)
        m.d.comb += [ctl.step.eq(slice_held | (fsm.ongoing("FLUSH") & (flush_cnt != 0))),
                     ctl.pe00_late.eq(single)]
        return m

    def _read_walk(self, m, reading, lda, b_estride):
        """The reads, one word per cycle while ``reading``, with adders only: down column k of A in steps of
        ``lda``, then along row k of Bop in steps of ``b_estride``; the next slice starts one word further into A
        and ``b_kstride`` further into B. Returns the walk's position (``is_a``, ``idx``), and whether the word
        read is the last of its slice (``slice_end``) and of the last slice (``last_slice_end``)."""
        ctl, fields = self.ctl, self.ctl.fields
        # Addresses are kept to the scratchpad's address width: the sequencer has checked that every address
        # MM touches is < sp_words, so arithmetic modulo 2**aw gives the right address.
        aw = self._addr_width
        addr = Signal(aw, name="rd_addr")   # a register: no adder between it and the RAM
        a_base = Signal(aw)                 # A + k: where column k of A starts
        b_base = Signal(aw)                 # B + k*ldb (tb = 0) or B + k (tb = 1): where Bop(k, 0) is
        is_a = Signal(name="rd_is_a")       # reading the A part of the slice (else the B part)
        idx = Signal(8, name="rd_idx")      # row i (A part) or column j (B part) being read
        k = Signal(16, name="rd_k")         # slice being read
        slice_end = ~is_a & (idx == fields.n_last)

        m.d.comb += [self.sp_rd.en.eq(reading), self.sp_rd.addr.eq(addr)]
        with m.If(ctl.start):
            m.d.sync += [addr.eq(ctl.instr.A), a_base.eq(ctl.instr.A), b_base.eq(ctl.instr.B),
                         is_a.eq(1), idx.eq(0), k.eq(0)]
        with m.Elif(reading & is_a):
            with m.If(idx == fields.m_last):
                m.d.sync += [addr.eq(b_base), is_a.eq(0), idx.eq(0)]
            with m.Else():
                m.d.sync += [addr.eq(addr + lda), idx.eq(idx + 1)]
        with m.Elif(reading):
            with m.If(slice_end):
                m.d.sync += [addr.eq(a_base + 1), a_base.eq(a_base + 1), b_base.eq(b_base + fields.b_kstride),
                             is_a.eq(1), idx.eq(0), k.eq(k + 1)]
            with m.Else():
                m.d.sync += [addr.eq(addr + b_estride), idx.eq(idx + 1)]
        return _Walk(is_a, idx, slice_end, slice_end & (k == fields.k_last))

    def _hold_slices(self, m, reading, walk):
        """The hold registers that gather each slice for the array's ``a`` and ``b``, loaded from the read walk's
        position of the cycle before, when its word arrives. Returns the condition that a slice is whole in them:
        the cycle after its last element arrived."""
        ctl = self.ctl
        arrives, arr_is_a, arr_idx = Signal(), Signal(), Signal(8)
        slice_arrives, last_slice_arrives = Signal(), Signal()
        slice_held, last_slice_held = Signal(), Signal()
        m.d.sync += [arrives.eq(reading), arr_is_a.eq(walk.is_a), arr_idx.eq(walk.idx),
                     slice_arrives.eq(reading & walk.slice_end), last_slice_arrives.eq(reading & walk.last_slice_end),
                     slice_held.eq(slice_arrives), last_slice_held.eq(last_slice_arrives)]
        # Only the elements of the current slice are ever loaded, so rows >= M and columns >= N keep the zero of
        # the clear; after the last slice's step the registers are zeroed again, so that the flush steps feed
        # zeros.
        operand = self.sp_rd.data[0:8].as_signed()
        for r in range(self._rows):
            hold = Signal(signed(8), name=f"hold_a{r}")
            with m.If(ctl.clear | last_slice_held):
                m.d.sync += hold.eq(0)
            with m.Elif(arrives & arr_is_a & (arr_idx == r)):
                m.d.sync += hold.eq(operand)
            m.d.comb += ctl.a[r].eq(hold)
        for c in range(self._cols):
            hold = Signal(signed(8), name=f"hold_b{c}")
            with m.If(ctl.clear | last_slice_held):
                m.d.sync += hold.eq(0)
            with m.Elif(arrives & ~arr_is_a & (arr_idx == c)):
                m.d.sync += hold.eq(operand)
            m.d.comb += ctl.b[c].eq(hold)
        return slice_held
