"""The DMA of a chip with an AXI4 external port (``Config.axi = 1``): LD and ST as bursts, every channel's
valid/ready respected."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ga2_sw.isa import Op
from ga2_sw.packing import AXI_MAX_BURST
from ga2_sw.timing import AXI_ST_DATA_DELAY

from .axi import BURST_INCR, AxiSignature
from .burst_plan import BEATS_WIDTH, beat_count, first_to_page, shortest
from .packed_dma import LanePorts
from ..ports import SpReadSignature, SpWriteSignature, UnitSignature, WORD, ext_address
from . import word_stores
from ..valid_chain import delayed

__all__ = ["AxiDMA", "ST_QUEUE_DEPTH"]

# Beats an ST may have read from the scratchpad and not yet handed to the W channel: the reads in flight
# (st_latency of them at a beat per cycle: the scratchpad's read latency and the data register) plus those a
# stalled W channel holds. Deeper than the reads in flight, so that a memory that never stalls never
# throttles the reads.
ST_QUEUE_DEPTH = 4


class AxiDMA(LanePorts, wiring.Component):
    """Moves ``len`` elements between an AXI4 subordinate and the scratchpad: a beat of one 32-bit element
    (``bus_bytes`` = 1) or of W packed bytes per cycle when the bus lets it (``ga2_sw.packing``).

    An instruction's beats go out as INCR bursts (``packing.bursts``: at most 256 beats, never across 4 KiB),
    requested one after the other on AR (LD) or AW (ST) without waiting for the data, so several are in flight.
    LD takes every R beat the cycle it comes (``rready`` is always high) and writes its elements to the
    scratchpad, sign-extending packed bytes; it finishes with its last beat. ST reads the scratchpad a beat per
    cycle, registers each beat's words (``AXI_ST_DATA_DELAY``), then puts them into a queue of
    ``ST_QUEUE_DEPTH`` beats (a beat goes straight to W when the queue is empty) and
    stops reading while the queue and the reads in flight could not hold another; it finishes when its last
    beat is taken on W and its last burst on AW. ``bready`` is always high. AXI orders nothing between the read
    and write channels, so an LD whose beats meet the beats of any ST not yet answered on B (their bounding
    range since none was outstanding) requests nothing until the answers are in: it never reads around a write
    still on its way. Responses (``rresp``, ``bresp``) are not checked.

    Against a subordinate that takes a request every cycle, answers a read burst accepted in cycle c from
    cycle c + ``ext_latency`` on, a beat per cycle, and takes W every cycle, the busy times are exactly
    ``ga2_sw.isa.OPS``'s: ``beats + ext_latency`` (LD), as on the bare port, and ``beats + st_latency`` (ST),
    the bare port's plus the data register's cycle.

    Members
    -------
    ctl : In(UnitSignature)
    sp_rd, sp_wr : Out(SpReadSignature).array(n), Out(SpWriteSignature).array(n)
        A scratchpad port per element of a beat: one at bus_bytes 1, W packed.
    ext : Out(AxiSignature)
    quiet : Out(1)
        No write burst is left unanswered on B after this cycle (the sequencer's ``ext_quiet``).
    plan : In(plan_layout)
        On a decoupled chip (``burst_plan.precomputed``): the instruction's beats, first burst and last beat,
        worked out by the checker, valid with ``ctl.instr``; otherwise the DMA works them out itself.
    stalled : Out(1)
        This busy cycle is one the ideal memory would not have cost: no beat moves (R taken or W sent) and the
        instruction has already had as many such cycles as the ideal memory gives it (``ext_latency`` for an LD,
        ``st_latency`` for an ST). Their sum is the busy time beyond ``isa.OPS``'s (the sequencer's
        ``stall_cycles``; ``ga2_sw.cycles.ExternalPort.stall``).

    Parameters
    ----------
    addr_width :
        The scratchpad address's width.
    bus_bytes :
        W, the elements of a beat (``Config.bus_bytes``): a scratchpad port each.
    ext_addr_width, data_bytes :
        The AXI4 byte address's width and the bytes of its data bus (``ga2_sw.packing.beat_bytes``).
    page_beats :
        Beats in a 4 KiB page (``burst_plan.page_beats``): no burst crosses one.
    ext_latency :
        The ideal memory's read latency, the stall count's grace for an LD.
    read_latency :
        Cycles from an ST's scratchpad read request to its data (``ga2_sw.timing.dma_read_latency``).
    st_latency :
        What an ST costs beyond its beats (``ga2_sw.timing.st_latency``): the read latency and the data
        register, which on a decoupled chip is at the banks (``data_at_banks``, ``ga2_sw.timing.dma_data_at_banks``).
    plan_layout :
        The layout of the checker's burst plan (``burst_plan.plan_layout``) where it works one out
        (``burst_plan.precomputed``), else None.
    st_words :
        ST's ``wd`` flag: whole words (``Config.st_words``, ``word_stores``).
    """

    def __init__(self, *, addr_width, bus_bytes, ext_addr_width, data_bytes, page_beats, ext_latency,
                 read_latency, st_latency, data_at_banks, plan_layout=None, st_words=False):
        self._w, self._addr_width, self._data_bytes, self._page_beats = bus_bytes, addr_width, data_bytes, page_beats
        self._ext_latency, self._read_latency, self._st_latency = ext_latency, read_latency, st_latency
        self._data_at_banks, self._precomputed, self._st_words = data_at_banks, plan_layout is not None, st_words
        aw, lanes = addr_width, bus_bytes
        super().__init__({"ctl": In(UnitSignature()), "sp_rd": Out(SpReadSignature(aw)).array(lanes),
                          "sp_wr": Out(SpWriteSignature(aw)).array(lanes),
                          "ext": Out(AxiSignature(ext_addr_width, 8 * data_bytes)),
                          "quiet": Out(1), "stalled": Out(1),
                          **({"plan": In(plan_layout)} if plan_layout is not None else {})})

    def elaborate(self, platform):
        m = Module()
        ext = self.ext
        w, lanes, spw = self._w, len(self.sp_rd), self._addr_width
        lane_bits, size = exact_log2(w), exact_log2(self._data_bytes)
        beat_width = len(ext.araddr) - size
        strobe_width = len(ext.wstrb)

        # the signals the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(beat_width=beat_width, strobe_width=strobe_width, ext=ext, lanes=lanes, w=w,
                            spw=spw, lane_bits=lane_bits, size=size, st_words=self._st_words)
        self._instruction_fields(m, s)
        self._requests(m, s)
        self._ld_beats(m, s)
        self._st_beats(m, s)
        self._done(m, s)
        self._stall_count(m, s)
        return m

    def _instruction_fields(self, m, s):
        """The instruction's beats, lanes and addresses, registered from the instruction register while the DMA is
        idle (so ``start`` drives only ``busy``), and the burst plan's registers."""
        # -- registered from the instruction register while idle (so `start` drives only `busy`) --
        instr, ld = self.ctl.instr, self.ctl.instr.op == Op.LD
        ext_addr = Mux(ld, ext_address(instr, Op.LD), ext_address(instr, Op.ST))
        sp_addr = Mux(ld, instr.dst, instr.src)
        length = word_stores.ext_length(instr, st_words=s.st_words)       # elements: len, or WORD_BYTES a word (ST's wd)
        first_lane = ext_addr[:s.lane_bits] if s.lane_bits else Const(0, 1)
        lane0 = word_stores.first_word(sp_addr, first_lane, word_stores.wide(instr, st_words=s.st_words),
                                       st_words=s.st_words)[:s.spw]

        is_ld = Signal()
        is_wide = Signal()
        lo, hi = Signal(max(1, s.lane_bits)), Signal(max(1, s.lane_bits))
        req_beat = Signal(s.beat_width)                                             # AR (LD) or AW (ST)
        data_sp, data_left, data_first = Signal(s.spw), Signal(BEATS_WIDTH), Signal()   # R beats (LD) or reads (ST)
        data_more = Signal()
        w_left, w_finished = Signal(BEATS_WIDTH), Signal()
        first_beat = ext_addr[s.lane_bits:s.lane_bits + s.beat_width]
        if self._precomputed:            # the checker's (burst_plan.py)
            n_beats, first_burst, last_beat = self.plan.beats, self.plan.first_burst, self.plan.last_beat
        else:
            assert not s.st_words, "a packed port is a decoupled chip's, whose checker plans the bursts"
            n_beats = beat_count(ext_addr, instr.len - 1, bus_bytes=s.w)          # ga2_sw.packing.beats
            first_burst = shortest(n_beats, first_to_page(first_beat, page_beats=self._page_beats))
            last_beat = (ext_addr + instr.len - 1)[s.lane_bits:s.lane_bits + s.beat_width]
        with m.If(~self.ctl.busy):
            m.d.sync += [
                is_ld.eq(ld), lo.eq(first_lane), hi.eq((ext_addr + length - 1)[:s.lane_bits] if s.lane_bits else 0),
                *([is_wide.eq(word_stores.wide(instr, st_words=s.st_words))] if s.st_words else []),
                req_beat.eq(ext_addr[s.lane_bits:s.lane_bits + s.beat_width]),
                data_sp.eq(lane0), data_left.eq(n_beats), data_first.eq(1), data_more.eq(instr.len != 0),
                w_left.eq(n_beats),
                w_finished.eq(0),
            ]
        with m.If(self.ctl.start):
            m.d.sync += self.ctl.busy.eq(1)

        def lane_mask(first, last):
            """The elements of a beat inside the range: from ``lo`` on the first beat, to ``hi`` on the last."""
            if not s.lane_bits:
                return Const(1, 1)
            # (the last lane is never below lo, nor lane 0 above hi: no comparison that is always true)
            return Cat(*((~first | (lo <= j) if j < s.lanes - 1 else 1) & (~last | (j <= hi) if j else 1)
                         for j in range(s.lanes)))
        s.__dict__.update(lane_mask=lane_mask, is_ld=is_ld, is_wide=is_wide, req_beat=req_beat, data_more=data_more,
                          first_beat=first_beat, page=self._page_beats, ld=ld, data_sp=data_sp,
                          data_left=data_left, data_first=data_first, w_left=w_left, w_finished=w_finished,
                          n_beats=n_beats, first_burst=first_burst, last_beat=last_beat)

    def _burst_plan(self, m, s, name):
        """AR's or AW's bursts held in registers a burst ahead, so no handshake waits on the burst arithmetic
        (computed from the handshake, the burst lengths, WLAST and the end of an ST were 18 ns paths on a 25F):
        ``length`` of the current burst, the beats ``left`` from it on, ``more`` (some left) and ``advance()``,
        the statements that move to the next burst. Loaded while idle from the instruction, as the rest."""
        page = s.page
        length = Signal(range(AXI_MAX_BURST + 1), name=f"{name}_len")
        left = Signal(BEATS_WIDTH, name=f"{name}_left")
        to_page, more = Signal(range(page + 1), name=f"{name}_to_page"), Signal(name=f"{name}_more")
        with m.If(~self.ctl.busy):
            m.d.sync += [length.eq(s.first_burst), left.eq(s.n_beats),
                         to_page.eq(first_to_page(s.first_beat, page_beats=s.page)), more.eq(self.ctl.instr.len != 0)]
        # The next burst: min(next_left, next_to_page, 256) (burst_plan.shortest), with every comparison
        # taken from the registers or from the subtractions' bits, beside the subtractions rather than after
        # them (compared after them, as shortest() does, the advance was a 17 ns path on a 25F): both lose
        # `length`, so next_left < next_to_page is left < to_page, unless this burst ends at its page's end
        # and the next has a whole page ahead (then next_left < page, its high bits); >= 256 is a bit test.
        next_left, ends_page = left - length, to_page == length
        next_to_page = Mux(ends_page, page, (to_page - length)[:len(to_page)])
        left_first = Mux(ends_page, next_left[exact_log2(page):] == 0, left < to_page)
        at_most = Mux(left_first, next_left[exact_log2(AXI_MAX_BURST):] != 0,
                      next_to_page[exact_log2(AXI_MAX_BURST):] != 0)
        next_length = Mux(at_most, AXI_MAX_BURST, Mux(left_first, next_left, next_to_page))

        def advance():
            return [length.eq(next_length), left.eq(next_left), to_page.eq(next_to_page),
                    more.eq(next_left != 0)]
        return length, left, more, advance

    def _requests(self, m, s):
        """AR or AW: the bursts one after the other without waiting for their data, an LD held behind the write
        fence while a write it meets is not yet answered on B."""
        # -- AR or AW: the bursts, one after the other, without waiting for their data --
        # The write fence: AXI orders nothing between reads and writes, so an LD whose beats meet those of a
        # write not yet answered on B waits for the answers. `written` bounds the beats of every ST since
        # b_pending was last zero (an ST's bursts are all on AW before it finishes, so before an LD starts).
        b_pending = Signal(17)              # bursts written and not yet answered on B
        written_first, written_last = Signal(s.beat_width), Signal(s.beat_width)
        with m.If(self.ctl.start & ~s.ld):
            fresh = b_pending == 0
            m.d.sync += [written_first.eq(Mux(fresh | (s.first_beat < written_first), s.first_beat, written_first)),
                         written_last.eq(Mux(fresh | (s.last_beat > written_last), s.last_beat, written_last))]
        # Both halves of the fence are registers, so that AR's valid is a gate from registers (the comparisons
        # and the pending count's zero test in front of it were a 25F seed's worst path, into b_pending and the
        # request registers' enables, 10.0 to 10.3 ns): `overlap` is loaded while idle from the instruction's
        # beats (`written` changes only as an ST starts, never while an LD waits), `pending` tracks
        # b_pending != 0 from the handshakes.
        overlap, pending = Signal(), Signal()
        with m.If(~self.ctl.busy):
            m.d.sync += overlap.eq((s.first_beat <= written_last) & (written_first <= s.last_beat))
        fenced = pending & overlap
        req_burst, req_left, req_more, next_request = self._burst_plan(m, s, "request")
        requesting = self.ctl.busy & req_more & ~(s.is_ld & fenced)
        for addr, length, sz, kind, valid in ((s.ext.araddr, s.ext.arlen, s.ext.arsize, s.ext.arburst, s.ext.arvalid),
                                              (s.ext.awaddr, s.ext.awlen, s.ext.awsize, s.ext.awburst, s.ext.awvalid)):
            m.d.comb += [addr.eq(Cat(Const(0, s.size), s.req_beat)), length.eq(req_burst - 1), sz.eq(s.size),
                         kind.eq(BURST_INCR)]
        m.d.comb += [s.ext.arvalid.eq(requesting & s.is_ld), s.ext.awvalid.eq(requesting & ~s.is_ld)]
        requested = Mux(s.is_ld, s.ext.arvalid & s.ext.arready, s.ext.awvalid & s.ext.awready)
        with m.If(requested):
            m.d.sync += [s.req_beat.eq(s.req_beat + req_burst), *next_request()]
        answered = s.ext.bvalid & s.ext.bready
        aw_taken = s.ext.awvalid & s.ext.awready
        m.d.sync += [b_pending.eq(b_pending + aw_taken - answered),
                     pending.eq(aw_taken | (pending & ~(answered & (b_pending == 1))))]
        m.d.comb += [s.ext.rready.eq(1), s.ext.bready.eq(1),
                     self.quiet.eq((b_pending == 0) | ((b_pending == 1) & answered & ~aw_taken))]
        s.__dict__.update(req_more=req_more)

    def _ld_beats(self, m, s):
        """LD: every R beat written to the scratchpad the cycle it comes, packed bytes sign-extended."""
        # -- LD: every R beat written the cycle it comes --
        data_mask = s.lane_mask(s.data_first, s.data_left == 1)
        receiving = self.ctl.busy & s.is_ld & s.ext.rvalid
        for j, port in enumerate(self.sp_wr):
            if s.lane_bits:
                byte = s.ext.rdata[8 * j:8 * j + 8]
                word = Cat(byte, byte[7].replicate(WORD - 8))
            else:
                word = s.ext.rdata
            m.d.comb += [port.en.eq(receiving & data_mask[j]), port.addr.eq(s.data_sp + j), port.data.eq(word)]
        s.__dict__.update(data_mask=data_mask, receiving=receiving)

    def _st_beats(self, m, s):
        """ST: scratchpad reads into the W queue, W beats out of it, WLAST from three registered flags."""
        # -- ST: scratchpad reads into the W queue, W beats out of it --
        queue = m.submodules.st_queue = fifo.SyncFIFO(width=len(s.ext.wdata) + s.strobe_width, depth=ST_QUEUE_DEPTH)
        in_flight = Signal(range(ST_QUEUE_DEPTH + 1))
        reading = self.ctl.busy & ~s.is_ld & s.data_more & (in_flight + queue.level < ST_QUEUE_DEPTH)
        # A beat's words are on sp_rd.data dma_read_latency cycles after its read, registered (AXI_ST_DATA_DELAY)
        # here a cycle later, or already at the banks (a decoupled chip: timing.dma_data_at_banks): `arriving`
        # the cycle the registered beat is ready, st_latency cycles after the read.
        latency, at_banks = self._st_latency, self._data_at_banks
        assert AXI_ST_DATA_DELAY == 1 and latency == self._read_latency + (0 if at_banks else AXI_ST_DATA_DELAY)
        arriving = delayed(m, reading, latency, "st_arriving")
        arriving_mask = delayed(m, Mux(reading, s.data_mask, 0), latency, "st_arriving_mask")
        m.d.sync += in_flight.eq(in_flight + reading - arriving)
        enables = word_stores.read_enables(s.data_mask, s.is_wide, bus_bytes=s.w, st_words=s.st_words)
        for j, port in enumerate(self.sp_rd):
            m.d.comb += [port.en.eq(reading & enables[j]), port.addr.eq(s.data_sp + j)]
        words = word_stores.beat_data(self.sp_rd, s.is_wide, st_words=s.st_words) if s.lane_bits else self.sp_rd[0].data
        read_words = Signal(len(words))
        m.d["comb" if at_banks else "sync"] += read_words.eq(words)
        if s.lane_bits:
            beat = Cat(read_words, arriving_mask)
        else:
            beat = Cat(read_words, Const((1 << s.strobe_width) - 1, s.strobe_width))
        head = Mux(queue.r_rdy, queue.r_data, beat)
        m.d.comb += [s.ext.wvalid.eq(queue.r_rdy | arriving), s.ext.wdata.eq(head[:len(s.ext.wdata)]),
                     s.ext.wstrb.eq(head[len(s.ext.wdata):])]
        sending = s.ext.wvalid & s.ext.wready
        m.d.comb += [queue.r_en.eq(sending), queue.w_data.eq(beat),
                     queue.w_en.eq(arriving & ~(sending & ~queue.r_rdy))]     # unless it went straight out
        # W's bursts are AW's (W must not wait for AW, nor AW for W), and a greedy burst (packing.bursts) ends at
        # its 256th beat, at a page's last beat or at the ST's last beat, whichever comes first: so WLAST is
        # three flags, each a register loaded with whether the next beat is such a beat (W's bursts planned
        # with AW's arithmetic, their lengths' recurrence was a 25F seed's worst path, 10.7 ns).
        page_bits, count_bits = exact_log2(s.page), exact_log2(AXI_MAX_BURST)
        w_beat = Signal(s.beat_width, name="w_beat")                  # the external beat of the next W beat
        w_count = Signal(count_bits, name="w_count")               # its place in its burst
        w_full, w_page_end, w_final = Signal(name="w_full"), Signal(name="w_page_end"), Signal(name="w_final")

        def page_end(beat, offset):
            """``beat`` + ``offset`` is a page's last beat (never, where the address space is within a page)."""
            return beat[:page_bits] == s.page - 1 - offset if s.beat_width >= page_bits else Const(0, 1)
        with m.If(~self.ctl.busy):
            m.d.sync += [w_beat.eq(s.first_beat), w_count.eq(0), w_full.eq(0), w_page_end.eq(page_end(s.first_beat, 0)),
                         w_final.eq(s.n_beats == 1)]
        m.d.comb += s.ext.wlast.eq(w_full | w_page_end | w_final)
        with m.If(sending):
            m.d.sync += [s.w_left.eq(s.w_left - 1), w_final.eq(s.w_left == 2),
                         w_beat.eq(w_beat + 1), w_page_end.eq(page_end(w_beat, 1)),
                         w_count.eq(Mux(s.ext.wlast, 0, w_count + 1)),
                         w_full.eq(~s.ext.wlast & (w_count == AXI_MAX_BURST - 2))]

        with m.If(s.receiving | reading):
            m.d.sync += [s.data_sp.eq(s.data_sp + word_stores.words_per_beat(s.is_wide, bus_bytes=s.w, st_words=s.st_words)),
                         s.data_left.eq(s.data_left - 1), s.data_first.eq(0),
                         s.data_more.eq(s.data_left != 1)]
        s.__dict__.update(sending=sending, latency=latency, w_final=w_final)

    def _done(self, m, s):
        """LD ends with its last beat; ST with its last W beat once its last burst is on AW."""
        # LD ends with its last beat (its last burst was requested before); ST with its last W beat once its last
        # burst has been requested on AW (a subordinate may take W before AW).
        last_sent = s.sending & s.w_final
        with m.If(last_sent):
            m.d.sync += s.w_finished.eq(1)
        all_requested = ~s.req_more       # (in a cycle before: against a memory that never stalls, always so)
        m.d.comb += self.ctl.done.eq(Mux(s.is_ld, s.receiving & (s.data_left == 1),
                                         self.ctl.busy & ~s.is_ld & (last_sent | s.w_finished) & all_requested))
        with m.If(self.ctl.done):
            m.d.sync += self.ctl.busy.eq(0)

    def _stall_count(self, m, s):
        """The stall count: busy cycles without a beat past the ones the ideal memory also has."""
        # -- the stall count: busy cycles without a beat, past the ones the ideal memory also has --
        grace = Signal(range(max(self._ext_latency, s.latency) + 1))
        with m.If(~self.ctl.busy):
            m.d.sync += grace.eq(Mux(s.ld, self._ext_latency, s.latency))
        idle_beat = self.ctl.busy & ~s.receiving & ~s.sending
        with m.If(idle_beat & (grace != 0)):
            m.d.sync += grace.eq(grace - 1)
        m.d.comb += self.stalled.eq(idle_beat & (grace == 0))
