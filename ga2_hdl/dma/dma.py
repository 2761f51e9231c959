"""The DMA: LD (external memory -> scratchpad) and ST (scratchpad -> external memory)."""

from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib.wiring import Out

from ga2_sw.isa import Op

from ..ports import ExtSignature, Unit, ext_address
from ..valid_chain import delayed

__all__ = ["DMA"]


class DMA(Unit):
    """Moves ``len`` words between the external-memory port and the scratchpad, one per cycle.

    LD issues a read request every cycle and writes each response into the scratchpad the cycle it
    arrives, so it is busy for ``len + ext_latency`` cycles. ST reads the scratchpad every cycle and writes
    each word to the external memory in the cycle it arrives (``len + dma_read_latency``: one cycle in order,
    two decoupled, where the banked scratchpad registers the request, ``ga2_sw.timing``). Reads are issued
    blindly: the memory has a fixed latency and never stalls (docs/ARCHITECTURE.md).

    Members
    -------
    ctl, sp_rd, sp_wr :
        The unit handshake and scratchpad ports (``ports.Unit``).
    ext : Out(ExtSignature)
        The external-memory port.

    Parameters
    ----------
    sp_addr_width, ext_addr_width :
        The widths of the scratchpad's and the external memory's word addresses.
    read_latency :
        Cycles from an ST's scratchpad read request to its data (``ga2_sw.timing.dma_read_latency``).
    """

    def __init__(self, *, sp_addr_width, ext_addr_width, read_latency):
        self._sp_addr_width, self._ext_addr_width = sp_addr_width, ext_addr_width
        self._read_latency = read_latency
        super().__init__(addr_width=sp_addr_width, members={"ext": Out(ExtSignature(ext_addr_width))})

    def elaborate(self, platform):
        m = Module()
        spw, extw = self._sp_addr_width, self._ext_addr_width
        is_ld = Signal()
        issue_addr = Signal(max(spw, extw))     # the address of the next read (external for LD, scratchpad for ST)
        issue_left = Signal(16)
        issue_more = Signal()                   # issue_left != 0, kept as a register (below)
        write_addr = Signal(max(spw, extw))
        write_left = Signal(16)

        # the signals the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(is_ld=is_ld, issue_addr=issue_addr, issue_left=issue_left, issue_more=issue_more,
                            write_addr=write_addr, write_left=write_left)
        self._issue(m, s)
        self._beats(m, s)
        return m

    def _issue(self, m, s):
        """Idle, the counters follow the instruction register (``start`` drives only ``busy``); busy, a read issued
        each cycle: from external memory for an LD, from the scratchpad for an ST."""
        # Idle, the counters follow the sequencer's instruction register, so they hold the instruction in the
        # cycle it starts and `start`, the end of the issue decision, drives only `busy` (as the enable of
        # the counters, from the lanes' busy bits through the issue logic, it was a 10.29 ns path on a 25F).
        instr, ld = self.ctl.instr, self.ctl.instr.op == Op.LD
        with m.If(~self.ctl.busy):
            m.d.sync += [
                s.is_ld.eq(ld),
                s.issue_addr.eq(Mux(ld, ext_address(instr, Op.LD), instr.src)),
                s.issue_left.eq(instr.len),
                s.issue_more.eq(instr.len != 0),
                s.write_addr.eq(Mux(ld, instr.dst, ext_address(instr, Op.ST))),
                s.write_left.eq(instr.len),
            ]
        with m.If(self.ctl.start):
            m.d.sync += self.ctl.busy.eq(1)

        # `issuing` is a read request and the bank selection behind it in the scratchpad: one gate from
        # registers (compared with zero there, issue_left's 16 bits put two more LUTs in front of the bank
        # registers' resets, 10.28 ns on a 25F seed).
        issuing = self.ctl.busy & s.issue_more
        with m.If(issuing):
            m.d.sync += [s.issue_addr.eq(s.issue_addr + 1), s.issue_left.eq(s.issue_left - 1),
                         s.issue_more.eq(s.issue_left != 1)]
        # An ST read issued dma_read_latency cycles ago: its word is on sp_rd.data.
        s.__dict__.update(issuing=issuing)

    def _beats(self, m, s):
        """Each word written where it goes as it arrives (LD: into the scratchpad; ST: to the external memory);
        done with the last."""
        st_data_valid = delayed(m, s.issuing & ~s.is_ld, self._read_latency, "st_data_valid")

        writing = Signal()
        with m.If(s.is_ld):
            m.d.comb += [
                self.ext.re.eq(s.issuing),
                self.ext.addr.eq(s.issue_addr),
                writing.eq(self.ctl.busy & self.ext.rvalid),
                self.sp_wr.en.eq(writing),
                self.sp_wr.addr.eq(s.write_addr),
                self.sp_wr.data.eq(self.ext.rdata),
            ]
        with m.Else():
            m.d.comb += [
                self.sp_rd.en.eq(s.issuing),
                self.sp_rd.addr.eq(s.issue_addr),
                writing.eq(st_data_valid),
                self.ext.we.eq(writing),
                self.ext.addr.eq(s.write_addr),
                self.ext.wdata.eq(self.sp_rd.data),
            ]
        with m.If(writing):
            m.d.sync += [s.write_addr.eq(s.write_addr + 1), s.write_left.eq(s.write_left - 1)]

        m.d.comb += self.ctl.done.eq(writing & (s.write_left == 1))
        with m.If(self.ctl.done):
            m.d.sync += self.ctl.busy.eq(0)
