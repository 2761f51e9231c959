"""The requantiser of a chip built with ``Config.rq_overlap``: an RQ may start while the RQ before it is still
writing, so a run of RQs keeps the pipeline full instead of draining it between instructions."""

from types import SimpleNamespace

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib.wiring import Out
from amaranth.utils import exact_log2

from ga2_sw.banking import RQ_FOLLOW_MAX_WAIT, RQ_MAX_SKEW, RQ_READ_TO_WRITE
from ga2_sw.timing import BANKED_READ_DELAY, SP_WRITE_DELAY

from ..ports import SpReadSignature, SpWriteSignature, Unit
from .requant_pipeline import SHIFT_WIDTH, RequantPipeline
from .requantiser import skew_taps, window_may_collide, write_skew
from ..valid_chain import delayed

__all__ = ["OverlappedRequantiser", "follow_wait"]


def follow_wait(src, track, *, banks, lanes, follow_decision):
    """The RTL of ``ga2_sw.banking.rq_follow_wait``, decided in the cycle after the start: ``track`` is the write
    track of the RQ before (``banking.rq_write_track``) in this cycle, so reading from ``ahead + w`` cycles on
    (``ahead = follow_decision - 1``, ``banking.rq_follow_decision``) meets its words from
    ``track + lanes * (ahead + w)``."""
    assert RQ_FOLLOW_MAX_WAIT == 2, "the choice below covers waits 0, 1 and 2"
    ahead = follow_decision - 1
    collide = [window_may_collide((src - (track + lanes * (ahead + w) if lanes > 1 else track + 1 + w))[:16],
                                  banks=banks, lanes=lanes, wrap=16)
               for w in range(RQ_FOLLOW_MAX_WAIT)]
    return Mux(~collide[0], 0, Mux(~collide[1], 1, 2))


class OverlappedRequantiser(Unit):
    """Executes RQ as :class:`ga2_hdl.vector.requantiser.Requantiser` does, element for element and cycle for cycle when
    it starts on an idle unit; but it takes the next RQ from the cycle after its last read, while its words are
    still in the pipeline (docs/ARCHITECTURE.md, "Overlapped requantisations").

    An RQ that starts in cycle ``S`` while the RQ before it still has words to write (``draining``) registers its
    fields in ``S``, decides in ``S + 1`` how long to wait (``follow_wait``: none of its reads may meet a write of
    the RQ before it on a bank) and reads from ``S + 2 + wait`` on. Everything the pipeline needs of an RQ enters
    with its words: the write skew selects the words from the first read's cycle on (the word path's copy
    ``pipeline.read_latency`` cycles later), the multiplier and shift travel beside each word
    (``RequantPipeline(carry_fields=True)``), and the write side takes the next RQ's destination from a queue of
    one when it has written the last word of the one before. The two RQs' entries never meet: the second reads
    at least two cycles after the first's last read, and the skews differ by at most ``RQ_MAX_SKEW``.

    ``busy`` (the lane cannot take another RQ) is high from the cycle after a start to its last read, and while
    the RQ before it still writes (the unit holds two); ``draining`` while any word is still to be written;
    ``older`` while the RQ before the last one started still is (the scoreboard keeps its ranges in flight).
    ``ga2_sw.cycles.DecoupledTimer`` is this timing.

    With ``Config.rq_lanes`` = ``w`` above 1 the unit is ``w`` lanes wide: each cycle of an RQ reads ``w``
    consecutive words, one through each lane's scratchpad ports (``sp_rd`` and ``sp_wr`` are arrays; consecutive
    words lie on distinct banks), through ``w`` pipelines side by side, and writes them ``rq_latency + skew``
    cycles later, so an RQ reads in ``ceil(len / w)`` cycles, its last cycle's lanes past ``len`` idle. The skew,
    the write track and the wait cover every lane (``ga2_sw.banking.rq_window_may_collide``), and the wait is
    registered (``decided``) before it is used: a following RQ reads from ``S + 3 + wait``
    (``banking.rq_follow_decision``). One lane is the unit above, register for register.

    Parameters
    ----------
    addr_width :
        The scratchpad address's width.
    banks :
        The banks of the decoupled chip's scratchpad (the unit is the decoupled chip's).
    lanes :
        Words read and written a cycle (``Config.rq_lanes``): a read and a write port each.
    read_latency :
        Cycles from a read request to its data (``ga2_sw.timing.vector_read_latency``).
    latency :
        The cycle model's cycles from an element's read request to its write request
        (``ga2_sw.timing.rq_latency``), which the pipeline must take.
    follow_decision :
        The cycle after a following RQ's start in which its wait is decided (``ga2_sw.banking.rq_follow_decision``).
    """

    def __init__(self, *, addr_width, banks, lanes, read_latency, latency, follow_decision):
        self._banks, self._lanes, self._read_latency = banks, lanes, read_latency
        self._latency, self._follow_decision = latency, follow_decision
        members = {"older": Out(1)}
        if lanes > 1:               # a read and a write port per lane (ga2_hdl.top: the vector lane's groups)
            members.update(sp_rd=Out(SpReadSignature(addr_width)).array(lanes),
                           sp_wr=Out(SpWriteSignature(addr_width)).array(lanes))
        super().__init__(addr_width=addr_width, members=members, read_port=lanes == 1)

    @property
    def read_ports(self):
        return [self.sp_rd] if self._lanes == 1 else list(self.sp_rd)

    @property
    def write_ports(self):
        return [self.sp_wr] if self._lanes == 1 else list(self.sp_wr)

    def elaborate(self, platform):
        m = Module()
        instr, lanes = self.ctl.instr, self._lanes
        pipelines = [RequantPipeline(read_latency=self._read_latency - 1, carry_fields=True) for _ in range(lanes)]
        for j, pipeline in enumerate(pipelines):
            m.submodules[f"pipeline{j or ''}"] = pipeline
        pipeline = pipelines[0]
        # The valid bits pass one register of ours (read_d1) before the pipeline, as in the Requantiser.
        assert 1 + pipeline.latency == self._latency, "an element's write request comes rq_latency after its read's"
        # The write track counts from requests: a read request and a write request pass as many registers
        # before the bank (the announce register, then the request or write register).
        assert RQ_READ_TO_WRITE == self._latency and BANKED_READ_DELAY == SP_WRITE_DELAY, \
            "the write track's lag (banking.rq_write_track) is the requantiser's latency"

        def times_lanes(value):     # value * lanes, lanes a power of two
            return value if lanes == 1 else value << exact_log2(lanes)

        # the signals the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(times_lanes=times_lanes, pipelines=pipelines, pipeline=pipeline, instr=instr,
                            lanes=lanes)
        self._registers(m, s)
        self._read_side(m, s)
        self._into_pipelines(m, s)
        self._out_of_pipelines(m, s)
        return m

    def _registers(self, m, s):
        """The read side's registers (the RQ being read, its fields following the instruction while idle) and the
        write side's (the RQ being written, and the one queued behind it)."""
        # The read side: the RQ being read. Its fields follow the instruction register while it is idle, as the
        # Requantiser's do, so the start pulse drives only the state bits. Each lane has its own address
        # register (lane j reads element j of each cycle's `lanes`), so that no adder sits in front of the
        # scratchpad's read ports.
        dst = Signal.like(s.instr.dst, name="dst")
        mult = Signal(s.pipeline.mult.shape(), name="mult")
        shift = Signal(SHIFT_WIDTH, name="shift")
        rd_addrs = [Signal.like(s.instr.src, name=f"rd_addr{j or ''}") for j in range(s.lanes)]
        rd_addr = rd_addrs[0]
        rd_left = Signal.like(s.instr.len, name="rd_left")
        deciding, waiting, reading = Signal(name="deciding"), Signal(name="waiting"), Signal(name="reading")
        wait_left = Signal(range(RQ_FOLLOW_MAX_WAIT + 1), name="wait_left")
        first_read = Signal(name="first_read")          # this cycle reads an RQ's first element

        # The write side: the RQ being written, and the one behind it.
        wr_addrs = [Signal.like(s.instr.dst, name=f"wr_addr{j or ''}") for j in range(s.lanes)]
        wr_addr = wr_addrs[0]
        wr_left = Signal(len(s.instr.len) + 1, name="wr_left")
        queued = Signal(name="queued")
        next_dst = Signal.like(s.instr.dst, name="next_dst")
        next_len = Signal.like(s.instr.len, name="next_len")
        draining = Signal(name="draining_r")

        # With several lanes the wait decided over their window is registered (`decided`) before it is used
        # (banking.rq_follow_decision): straight into `reading` it was the two-lane chip's critical path.
        decided = Signal(name="decided") if s.lanes > 1 else None
        deciding_or_decided = deciding if s.lanes == 1 else deciding | decided
        read_idle = ~(deciding_or_decided | waiting | reading)
        m.d.comb += [self.ctl.busy.eq(deciding_or_decided | waiting | reading | queued),
                     self.ctl.draining.eq(draining), self.older.eq(queued)]
        with m.If(read_idle):
            m.d.sync += [dst.eq(s.instr.dst), mult.eq(s.instr.m), shift.eq(s.instr.s),
                         rd_addr.eq(s.instr.src), rd_left.eq(s.instr.len)]
            m.d.sync += [addr.eq(s.instr.src + j) for j, addr in enumerate(rd_addrs) if j]
        s.__dict__.update(dst=dst, mult=mult, shift=shift, rd_addrs=rd_addrs, rd_addr=rd_addr, rd_left=rd_left,
                          wait_left=wait_left, first_read=first_read, wr_addrs=wr_addrs, wr_addr=wr_addr,
                          wr_left=wr_left, queued=queued, next_dst=next_dst, next_len=next_len, draining=draining,
                          decided=decided, deciding=deciding, waiting=waiting, reading=reading)

    def _read_side(self, m, s):
        """Start, the follow decision beside an RQ still writing (its wait from the write track), and the reads."""
        # Start: on an idle unit read from the next cycle; beside an RQ still writing, decide first.
        with m.If(self.ctl.start):
            m.d.sync += [s.deciding.eq(s.draining), s.reading.eq(~s.draining), s.first_read.eq(~s.draining)]
        with m.Else():
            m.d.sync += s.first_read.eq(0)
        # The write track (banking.rq_write_track) of the RQ read last: the first word it writes in the cycle in
        # which a read requested now reaches the bank. `lanes` more each cycle; set as an RQ reads its first
        # elements, and its skew taken off in the next cycle, from the skew register: loaded with the skew
        # computed from the fields in that cycle, the track was the chip's critical path (rq.rd_addr -> rq.track,
        # 11.2 ns, 89.03 MHz on a 25F). Nothing reads it before a following RQ's decision, two cycles after the
        # first read at least.
        track = Signal(16, name="track")
        skew_now, skew = Signal(range(RQ_MAX_SKEW + 1)), Signal(range(RQ_MAX_SKEW + 1), name="skew")
        m.d.comb += skew_now.eq(write_skew(s.rd_addr, s.dst, banks=self._banks, lanes=self._lanes))
        after_first_read = Signal(name="after_first_read")
        m.d.sync += after_first_read.eq(s.first_read)
        with m.If(s.first_read):
            m.d.sync += track.eq(s.dst - s.times_lanes(RQ_READ_TO_WRITE) + s.lanes)
        with m.Elif(after_first_read):
            m.d.sync += track.eq(track + s.lanes - s.times_lanes(skew))
        with m.Else():
            m.d.sync += track.eq(track + s.lanes)
        wait_now = Signal(range(RQ_FOLLOW_MAX_WAIT + 1))
        m.d.comb += wait_now.eq(follow_wait(s.rd_addr, track, banks=self._banks, lanes=self._lanes,
                                                follow_decision=self._follow_decision))
        if s.lanes == 1:
            with m.If(s.deciding):
                m.d.sync += [s.deciding.eq(0), s.wait_left.eq(wait_now), s.waiting.eq(wait_now != 0),
                             s.reading.eq(wait_now == 0), s.first_read.eq(wait_now == 0)]
        else:
            wait_q = Signal.like(wait_now, name="wait_q")
            with m.If(s.deciding):
                m.d.sync += [s.deciding.eq(0), s.decided.eq(1), wait_q.eq(wait_now)]
            with m.If(s.decided):
                m.d.sync += [s.decided.eq(0), s.wait_left.eq(wait_q), s.waiting.eq(wait_q != 0),
                             s.reading.eq(wait_q == 0), s.first_read.eq(wait_q == 0)]
        with m.If(s.waiting):
            m.d.sync += s.wait_left.eq(s.wait_left - 1)
            with m.If(s.wait_left == 1):
                m.d.sync += [s.waiting.eq(0), s.reading.eq(1), s.first_read.eq(1)]
        # Lane j reads while the RQ has more than j elements left (only its last cycle may leave lanes idle).
        lane_reading = [s.reading] + [s.reading & (s.rd_left > j) for j in range(1, s.lanes)]
        with m.If(s.reading):
            m.d.sync += [addr.eq(addr + s.lanes) for addr in s.rd_addrs]
            m.d.sync += [s.rd_left.eq(s.rd_left - s.lanes), s.reading.eq(s.rd_left != 1 if s.lanes == 1 else s.rd_left > s.lanes)]
        for rd, en, addr in zip(self.read_ports, lane_reading, s.rd_addrs):
            m.d.comb += [rd.en.eq(en), rd.addr.eq(addr)]
        s.__dict__.update(lane_reading=lane_reading, skew_now=skew_now, skew=skew)

    def _into_pipelines(self, m, s):
        """Into the pipelines: each RQ's words at its own skew, its fields beside them."""
        # Into the pipelines: the words `skew` cycles after their reads (Requantiser), each RQ's skew and fields
        # taken in its first read's cycle. The valid bits are selected as a read enters the pipeline, the words
        # pipeline.read_latency cycles later, each with the skew of its own RQ.
        entry_mult, entry_shift = Signal.like(s.mult, name="entry_mult"), Signal.like(s.shift, name="entry_shift")
        with m.If(s.first_read):
            m.d.sync += [s.skew.eq(s.skew_now), entry_mult.eq(s.mult), entry_shift.eq(s.shift)]
        word_skew = delayed(m, s.skew, s.pipeline.read_latency, "word_skew")
        taps = [skew_taps(m, en, rd.data, lane=str(j or ""))
                for j, (rd, en) in enumerate(zip(self.read_ports, s.lane_reading))]
        word_mult = delayed(m, entry_mult, s.pipeline.read_latency, "word_mult")
        word_shift = delayed(m, entry_shift, s.pipeline.read_latency, "word_shift")
        for lane_pipeline, (reads_late, words) in zip(s.pipelines, taps):
            m.d.comb += [lane_pipeline.read.eq(Array(reads_late)[s.skew]), lane_pipeline.word.eq(Array(words)[word_skew]),
                         lane_pipeline.mult.eq(word_mult), lane_pipeline.shift.eq(word_shift)]

    def _out_of_pipelines(self, m, s):
        """Out of the pipelines: the elements written to the RQ being written, the queued RQ's destination taken
        after the last word."""
        # Out of the pipelines: a cycle's elements (lane j the j-th) to the RQ being written; the next RQ's
        # destination waits in the queue until its last word. A start on an idle write side loads it directly.
        writing = s.pipeline.o.valid
        for wr, lane_pipeline, addr in zip(self.write_ports, s.pipelines, s.wr_addrs):
            m.d.comb += [wr.en.eq(lane_pipeline.o.valid), wr.addr.eq(addr), wr.data.eq(lane_pipeline.o.payload)]
        written = writing if s.lanes == 1 else sum(p.o.valid for p in s.pipelines)     # lanes 0 .. k-1 write
        left_after = Signal.like(s.wr_left)                  # the writes left once this cycle's are made
        left_next, addr_next = Signal.like(s.wr_left), Signal.like(s.wr_addr)
        queued_next = Signal(name="queued_next")
        m.d.comb += [left_after.eq(s.wr_left - written), left_next.eq(left_after),
                     addr_next.eq(s.wr_addr + (writing if s.lanes == 1 else s.times_lanes(writing))),
                     queued_next.eq(s.queued)]
        with m.If(self.ctl.start):
            with m.If(s.draining):
                m.d.sync += [s.next_dst.eq(s.instr.dst), s.next_len.eq(s.instr.len)]
                m.d.comb += queued_next.eq(1)
            with m.Else():
                m.d.comb += [addr_next.eq(s.instr.dst), left_next.eq(s.instr.len)]
        with m.If(s.queued & (left_after == 0)):
            m.d.comb += [addr_next.eq(s.next_dst), left_next.eq(s.next_len), queued_next.eq(0)]
        m.d.sync += [s.wr_addr.eq(addr_next), s.wr_left.eq(left_next), s.queued.eq(queued_next),
                     s.draining.eq((left_next != 0) | queued_next)]
        m.d.sync += [addr.eq(addr_next + j) for j, addr in enumerate(s.wr_addrs) if j]
        m.d.comb += self.ctl.done.eq(writing & (s.wr_left == 1 if s.lanes == 1 else left_after == 0) & ~s.queued)
