"""The packed DMA: LD and ST over an external port of W = ``bus_bytes`` int8 elements per beat."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ga2_sw.isa import Op

from ..ports import ExtSignature, SpReadSignature, SpWriteSignature, UnitSignature, WORD, ext_address
from . import word_stores
from ..valid_chain import delayed

__all__ = ["PackedDMA", "LanePorts"]


class LanePorts:
    """What the DMAs with a scratchpad port per element of a beat share (``PackedDMA``, ``AxiDMA``): their port
    lists, which ``ga2_hdl.top`` puts in the DMA lane's groups on port A."""

    @property
    def read_ports(self):
        return list(self.sp_rd)

    @property
    def write_ports(self):
        return list(self.sp_wr)


class PackedDMA(LanePorts, wiring.Component):
    """Moves ``len`` elements between a packed external memory and the scratchpad, one beat of W bytes per
    cycle (``ga2_sw.packing``).

    An LD requests a beat every cycle and writes the beat's bytes, sign-extended, to W consecutive scratchpad
    words in the cycle it arrives; an ST reads W consecutive words a cycle and writes their low bytes as one
    beat when they arrive. Each byte lane has its own scratchpad port (lane j serves the elements at byte
    lane j of their beat): consecutive words lie in distinct banks while W < ``sp_banks`` (``ga2_sw.banking``,
    which ``Config`` requires), so the banks take a whole beat in one cycle. The first and last beats of an
    instruction may be partial: only the lanes inside its range access the scratchpad, and an ST's strobes
    keep the other bytes of the beat. Busy times: ``beats + ext_latency`` (LD), ``beats +
    dma_read_latency`` (ST), as ``ga2_sw.isa.OPS`` says through ``ga2_sw.packing.beats``.

    Members
    -------
    ctl : In(UnitSignature)
    sp_rd : Out(SpReadSignature).array(W)
        The lanes' read ports (ST).
    sp_wr : Out(SpWriteSignature).array(W)
        The lanes' write ports (LD).
    ext : Out(ExtSignature)
        The packed external-memory port (``ports.ext_signature``).
    older : Out(1)
        With ``Config.ld_overlap``: the LD before the last one started still has beats to write. The DMA then
        takes an LD from the cycle after the last one's last request, keeping the LD it writes and one more:
        ``busy`` is the issue side (an LD's requests, a whole ST) or ``older``, ``ctl.draining`` is high while an
        LD has a beat to write, and ``done`` comes with an LD's last write or an ST's last beat
        (docs/ARCHITECTURE.md, "Overlapped loads").

    Parameters
    ----------
    addr_width :
        The scratchpad address's width.
    banks :
        The scratchpad's banks (more than W: a beat's words lie on distinct banks).
    bus_bytes :
        W, the bytes of a beat (2 or more; the chapter's port of one is :class:`~ga2_hdl.dma.dma.DMA`'s).
    ext_addr_width :
        The width of the external port's beat address.
    read_latency :
        Cycles from an ST's scratchpad read request to its data (``ga2_sw.timing.dma_read_latency``).
    ld_overlap :
        An LD may start while the one before it still writes (``Config.ld_overlap``).
    st_words :
        ST's ``wd`` flag: whole words (``Config.st_words``, ``word_stores``).
    """

    def __init__(self, *, addr_width, banks, bus_bytes, ext_addr_width, read_latency, ld_overlap=False,
                 st_words=False):
        if bus_bytes < 2:
            raise ValueError("PackedDMA needs bus_bytes > 1; the chapter's port is ga2_hdl.dma.dma.DMA")
        assert bus_bytes < banks, "a beat's words lie in distinct banks (Config requires it)"
        self._addr_width, self._w, self._read_latency = addr_width, bus_bytes, read_latency
        self._ld_overlap, self._st_words = bool(ld_overlap), bool(st_words)
        aw, w = addr_width, bus_bytes
        super().__init__({"ctl": In(UnitSignature()), "sp_rd": Out(SpReadSignature(aw)).array(w),
                          "sp_wr": Out(SpWriteSignature(aw)).array(w),
                          "ext": Out(ExtSignature(ext_addr_width, bus_bytes)),
                          **({"older": Out(1)} if ld_overlap else {})})

    def elaborate(self, platform):
        m = Module()
        w, spw = self._w, self._addr_width
        lane_bits, beat_bits = exact_log2(w), len(self.ext.addr)

        # the signals the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(w=w, spw=spw, lane_bits=lane_bits, beat_bits=beat_bits)
        self._issue(m, s)
        self._beats(m, s)
        if self._ld_overlap:
            self._overlapped_loads(m, s)
        return m

    def _issue(self, m, s):
        """The issue side: the fields registered while idle (``start`` drives only ``busy``), the beats' lanes, an
        LD's requests or an ST's reads, a beat each cycle."""
        # Registered from the sequencer's instruction register while idle, as in the chapter's DMA, so the
        # start pulse drives only `busy`. The external address splits into its beat and the byte lane of its
        # first element; the scratchpad address of lane 0 of the first beat is the range's start less that lane.
        instr, ld, st_words = self.ctl.instr, self.ctl.instr.op == Op.LD, self._st_words
        overlap = self._ld_overlap
        # The issue side's register: the unit's busy bit, or with ld_overlap a register of its own (an LD's
        # requests, or a whole ST), busy being it or an older LD still writing.
        active = Signal(name="active") if overlap else self.ctl.busy
        ext_addr = Mux(ld, ext_address(instr, Op.LD), ext_address(instr, Op.ST))
        sp_addr = Mux(ld, instr.dst, instr.src)
        length = word_stores.ext_length(instr, st_words=st_words)         # bytes: len, or WORD_BYTES a word (ST's wd)
        first_lane, beat = ext_addr[:s.lane_bits], ext_addr[s.lane_bits:s.lane_bits + s.beat_bits]
        last_lane = (ext_addr + length - 1)[:s.lane_bits]
        n_beats = (Cat(first_lane, Const(0, 1)) + length + s.w - 1) >> s.lane_bits      # ga2_sw.packing.beats
        is_ld = Signal()
        is_wide = Signal()
        lane0 = word_stores.first_word(sp_addr, first_lane, word_stores.wide(instr, st_words=st_words),
                                       st_words=st_words)[:s.spw]

        lo, hi = Signal(s.lane_bits), Signal(s.lane_bits)       # the first beat's first lane, the last beat's last
        issue_sp, issue_beat = Signal(s.spw), Signal(s.beat_bits)
        issue_left, issue_more, issue_first = Signal(17), Signal(), Signal()
        write_sp, write_beat = Signal(s.spw), Signal(s.beat_bits)
        write_left, write_first = Signal(17), Signal()
        with m.If(~active):
            m.d.sync += [
                is_ld.eq(ld), lo.eq(first_lane), hi.eq(last_lane),
                *([is_wide.eq(word_stores.wide(instr, st_words=st_words))] if st_words else []),
                issue_sp.eq(lane0), issue_beat.eq(beat), issue_left.eq(n_beats),
                issue_more.eq(instr.len != 0), issue_first.eq(1),
                write_sp.eq(lane0), write_beat.eq(beat), write_left.eq(n_beats), write_first.eq(1),
            ]
        with m.If(self.ctl.start):
            m.d.sync += active.eq(1)

        def lanes(first, last, lo=lo, hi=hi):
            """The lanes of a beat inside the range: from ``lo`` on the first beat, to ``hi`` on the last."""
            # (the last lane is never below lo, nor lane 0 above hi: no comparison that is always true)
            return Cat(*((~first | (lo <= j) if j < s.w - 1 else 1) & (~last | (j <= hi) if j else 1)
                         for j in range(s.w)))

        issuing = active & issue_more
        issue_lanes = lanes(issue_first, issue_left == 1)
        with m.If(issuing):
            m.d.sync += [issue_sp.eq(issue_sp + word_stores.words_per_beat(is_wide, bus_bytes=s.w, st_words=st_words)), issue_beat.eq(issue_beat + 1),
                         issue_left.eq(issue_left - 1),
                         issue_more.eq(issue_left != 1), issue_first.eq(0)]
        # The lanes of an ST beat whose words are on sp_rd.data now (read dma_read_latency cycles ago).
        st_lanes = delayed(m, Mux(issuing & ~is_ld, issue_lanes, 0), self._read_latency, "st_lanes")
        s.__dict__.update(lanes=lanes, overlap=overlap, active=active, last_lane=last_lane, n_beats=n_beats,
                          lane0=lane0, is_ld=is_ld, issuing=issuing, issue_lanes=issue_lanes, st_lanes=st_lanes,
                          ld=ld, is_wide=is_wide, first_lane=first_lane, issue_sp=issue_sp, issue_beat=issue_beat,
                          issue_left=issue_left, write_sp=write_sp, write_beat=write_beat, write_left=write_left,
                          write_first=write_first)

    def _beats(self, m, s):
        """Each beat moved the cycle it can be: an LD's bytes into the scratchpad as they arrive (here only
        without overlapped loads), an ST's words out as a beat; without overlapped loads, done with the last."""
        writing, write_lanes = Signal(), Signal(s.w)
        with m.If(s.is_ld):
            m.d.comb += [
                self.ext.re.eq(s.issuing),
                self.ext.addr.eq(s.issue_beat),
            ]
            if not s.overlap:
                m.d.comb += [
                    writing.eq(self.ctl.busy & self.ext.rvalid),
                    write_lanes.eq(Mux(writing, s.lanes(s.write_first, s.write_left == 1), 0)),
                ]
                self._write_beats(m, write_lanes, s.write_sp)
        with m.Else():
            m.d.comb += [
                writing.eq(s.st_lanes.any()),
                self.ext.we.eq(writing),
                self.ext.wstrb.eq(s.st_lanes),
                self.ext.addr.eq(s.write_beat),
                self.ext.wdata.eq(word_stores.beat_data(self.sp_rd, s.is_wide, st_words=self._st_words)),
            ]
            enables = word_stores.read_enables(s.issue_lanes, s.is_wide, bus_bytes=s.w, st_words=self._st_words)
            for j, port in enumerate(self.sp_rd):
                m.d.comb += [port.en.eq(s.issuing & enables[j]), port.addr.eq(s.issue_sp + j)]
        with m.If(writing):
            m.d.sync += [s.write_sp.eq(s.write_sp + s.w), s.write_beat.eq(s.write_beat + 1), s.write_left.eq(s.write_left - 1),
                         s.write_first.eq(0)]

        if not s.overlap:
            m.d.comb += self.ctl.done.eq(writing & (s.write_left == 1))
            with m.If(self.ctl.done):
                m.d.sync += self.ctl.busy.eq(0)
        s.__dict__.update(writing=writing)

    def _overlapped_loads(self, m, s):
        """With ``ld_overlap``: the LDs' write side, apart from the issue side, with room for one more LD."""
        # -- ld_overlap: the LDs' write side, apart from the issue side, with room for one more LD --
        # An LD's write context (its first scratchpad word, beats, lanes) waits in `queued_*` from its start
        # (loaded there while the issue side is idle, like the issue side's registers, so `start` drives only two
        # flip-flops) and moves to the write side once that is free: at once, or in the cycle the LD before it
        # writes its last beat. Its beats come `ext_latency` cycles after its requests, which follow the older
        # LD's last request: so after the older LD's last beat, however soon the lane took it.
        pending = Signal(name="ld_pending")             # an LD's write context waits in queued_*
        draining = Signal(name="ld_draining")           # the write side has an LD's beats to take
        older = pending & draining
        queued_sp, queued_left = Signal(s.spw, name="queued_sp"), Signal(17, name="queued_left")
        queued_lo, queued_hi = Signal(s.lane_bits, name="queued_lo"), Signal(s.lane_bits, name="queued_hi")
        ld_sp, ld_left, ld_first = Signal(s.spw, name="ld_sp"), Signal(17, name="ld_left"), Signal(name="ld_first")
        ld_lo, ld_hi = Signal(s.lane_bits, name="ld_lo"), Signal(s.lane_bits, name="ld_hi")
        with m.If(~s.active & ~pending):
            m.d.sync += [queued_sp.eq(s.lane0), queued_left.eq(s.n_beats), queued_lo.eq(s.first_lane),
                         queued_hi.eq(s.last_lane)]
        ld_writing = draining & self.ext.rvalid
        last_beat = ld_writing & (ld_left == 1)
        with m.If(pending & (~draining | last_beat)):
            m.d.sync += [ld_sp.eq(queued_sp), ld_left.eq(queued_left), ld_first.eq(1), ld_lo.eq(queued_lo),
                         ld_hi.eq(queued_hi), draining.eq(1), pending.eq(0)]
        with m.Elif(last_beat):
            m.d.sync += draining.eq(0)
        with m.Elif(ld_writing):
            m.d.sync += [ld_sp.eq(ld_sp + s.w), ld_left.eq(ld_left - 1), ld_first.eq(0)]
        with m.If(self.ctl.start):
            m.d.sync += pending.eq(s.ld)
        self._write_beats(m, Mux(ld_writing, s.lanes(ld_first, ld_left == 1, ld_lo, ld_hi), 0), ld_sp)

        # The issue side ends with an LD's last request or an ST's last beat.
        last_request = s.issuing & s.is_ld & (s.issue_left == 1)
        st_done = s.writing & (s.write_left == 1)
        with m.If(last_request | st_done):
            m.d.sync += s.active.eq(0)
        m.d.comb += [self.ctl.busy.eq(s.active | older), self.ctl.draining.eq(draining), self.older.eq(older),
                     self.ctl.done.eq(last_beat | st_done)]

    def _write_beats(self, m, write_lanes, write_sp):
        """Each lane ``j`` in ``write_lanes`` writes byte ``j`` of the beat on ``ext.rdata``, sign-extended, to word
        ``write_sp + j``."""
        for j, port in enumerate(self.sp_wr):
            byte = self.ext.rdata[8 * j:8 * j + 8]
            m.d.comb += [port.en.eq(write_lanes[j]), port.addr.eq(write_sp + j),
                         port.data.eq(Cat(byte, byte[7].replicate(WORD - 8)))]
