"""The requantiser of a chip built with ``Config.rq_overlap``: an RQ may start while the RQ before it is still
writing, so a run of RQs keeps the pipeline full instead of draining it between instructions."""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib.wiring import Out
from amaranth.utils import exact_log2

from ga2_sw.banking import RQ_FOLLOW_MAX_WAIT, RQ_MAX_SKEW, RQ_READ_TO_WRITE, rq_follow_decision
from ga2_sw.timing import BANKED_READ_DELAY, SP_WRITE_DELAY, rq_latency, vector_read_latency

from .ports import SpReadSignature, SpWriteSignature, Unit, sp_addr_width
from .requant_pipeline import SHIFT_WIDTH, RequantPipeline
from .requantiser import skew_taps, window_may_collide, write_skew
from .valid_chain import delayed

__all__ = ["OverlappedRequantiser", "follow_wait"]


def follow_wait(src, track, config):
    """The RTL of ``ga2_sw.banking.rq_follow_wait``, decided in the cycle after the start: ``track`` is the write
    track of the RQ before (``banking.rq_write_track``) in this cycle, so reading from ``ahead + w`` cycles on
    (``ahead = rq_follow_decision - 1``) meets its words from ``track + rq_lanes * (ahead + w)``."""
    assert RQ_FOLLOW_MAX_WAIT == 2, "the choice below covers waits 0, 1 and 2"
    lanes, ahead = config.rq_lanes, rq_follow_decision(config) - 1
    collide = [window_may_collide((src - (track + lanes * (ahead + w) if lanes > 1 else track + 1 + w))[:16],
                                  config, wrap=16)
               for w in range(RQ_FOLLOW_MAX_WAIT)]
    return Mux(~collide[0], 0, Mux(~collide[1], 1, 2))


class OverlappedRequantiser(Unit):
    """Executes RQ as :class:`ga2_hdl.requantiser.Requantiser` does, element for element and cycle for cycle when
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
    """

    def __init__(self, config):
        if not config.rq_overlap:
            raise ValueError("OverlappedRequantiser is the requantiser of chips built with rq_overlap = 1")
        self._lanes = config.rq_lanes
        members = {"older": Out(1)}
        if self._lanes > 1:         # a read and a write port per lane (ga2_hdl.top: the vector lane's groups)
            aw = sp_addr_width(config)
            members.update(sp_rd=Out(SpReadSignature(aw)).array(self._lanes),
                           sp_wr=Out(SpWriteSignature(aw)).array(self._lanes))
        super().__init__(config, members, read_port=self._lanes == 1)

    @property
    def read_ports(self):
        return [self.sp_rd] if self._lanes == 1 else list(self.sp_rd)

    @property
    def write_ports(self):
        return [self.sp_wr] if self._lanes == 1 else list(self.sp_wr)

    def elaborate(self, platform):
        m = Module()
        cfg, instr, lanes = self._config, self.ctl.instr, self._lanes
        read_latency = vector_read_latency(cfg)
        pipelines = [RequantPipeline(read_latency - 1, carry_fields=True) for _ in range(lanes)]
        for j, pipeline in enumerate(pipelines):
            m.submodules[f"pipeline{j or ''}"] = pipeline
        pipeline = pipelines[0]
        # The valid bits pass one register of ours (read_d1) before the pipeline, as in the Requantiser.
        assert 1 + pipeline.latency == rq_latency(cfg), "an element's write request comes rq_latency after its read's"
        # The write track counts from requests: a read request and a write request pass as many registers
        # before the bank (the announce register, then the request or write register).
        assert RQ_READ_TO_WRITE == rq_latency(cfg) and BANKED_READ_DELAY == SP_WRITE_DELAY, \
            "the write track's lag (banking.rq_write_track) is the requantiser's latency"

        def times_lanes(value):     # value * lanes, lanes a power of two
            return value if lanes == 1 else value << exact_log2(lanes)

        # The read side: the RQ being read. Its fields follow the instruction register while it is idle, as the
        # Requantiser's do, so the start pulse drives only the state bits. Each lane has its own address
        # register (lane j reads element j of each cycle's `lanes`), so that no adder sits in front of the
        # scratchpad's read ports.
        dst = Signal.like(instr.dst, name="dst")
        mult = Signal(pipeline.mult.shape(), name="mult")
        shift = Signal(SHIFT_WIDTH, name="shift")
        rd_addrs = [Signal.like(instr.src, name=f"rd_addr{j or ''}") for j in range(lanes)]
        rd_addr = rd_addrs[0]
        rd_left = Signal.like(instr.len, name="rd_left")
        deciding, waiting, reading = Signal(name="deciding"), Signal(name="waiting"), Signal(name="reading")
        wait_left = Signal(range(RQ_FOLLOW_MAX_WAIT + 1), name="wait_left")
        first_read = Signal(name="first_read")          # this cycle reads an RQ's first element

        # The write side: the RQ being written, and the one behind it.
        wr_addrs = [Signal.like(instr.dst, name=f"wr_addr{j or ''}") for j in range(lanes)]
        wr_addr = wr_addrs[0]
        wr_left = Signal(len(instr.len) + 1, name="wr_left")
        queued = Signal(name="queued")
        next_dst = Signal.like(instr.dst, name="next_dst")
        next_len = Signal.like(instr.len, name="next_len")
        draining = Signal(name="draining_r")

        # With several lanes the wait decided over their window is registered (`decided`) before it is used
        # (banking.rq_follow_decision): straight into `reading` it was the two-lane chip's critical path.
        decided = Signal(name="decided") if lanes > 1 else None
        deciding_or_decided = deciding if lanes == 1 else deciding | decided
        read_idle = ~(deciding_or_decided | waiting | reading)
        m.d.comb += [self.ctl.busy.eq(deciding_or_decided | waiting | reading | queued),
                     self.ctl.draining.eq(draining), self.older.eq(queued)]
        with m.If(read_idle):
            m.d.sync += [dst.eq(instr.dst), mult.eq(instr.m), shift.eq(instr.s),
                         rd_addr.eq(instr.src), rd_left.eq(instr.len)]
            m.d.sync += [addr.eq(instr.src + j) for j, addr in enumerate(rd_addrs) if j]

        # Start: on an idle unit read from the next cycle; beside an RQ still writing, decide first.
        with m.If(self.ctl.start):
            m.d.sync += [deciding.eq(draining), reading.eq(~draining), first_read.eq(~draining)]
        with m.Else():
            m.d.sync += first_read.eq(0)
        # The write track (banking.rq_write_track) of the RQ read last: the first word it writes in the cycle in
        # which a read requested now reaches the bank. `lanes` more each cycle; set as an RQ reads its first
        # elements, and its skew taken off in the next cycle, from the skew register: loaded with the skew
        # computed from the fields in that cycle, the track was the chip's critical path (rq.rd_addr -> rq.track,
        # 11.2 ns, 89.03 MHz on a 25F). Nothing reads it before a following RQ's decision, two cycles after the
        # first read at least.
        track = Signal(16, name="track")
        skew_now, skew = Signal(range(RQ_MAX_SKEW + 1)), Signal(range(RQ_MAX_SKEW + 1), name="skew")
        m.d.comb += skew_now.eq(write_skew(rd_addr, dst, cfg))
        after_first_read = Signal(name="after_first_read")
        m.d.sync += after_first_read.eq(first_read)
        with m.If(first_read):
            m.d.sync += track.eq(dst - times_lanes(RQ_READ_TO_WRITE) + lanes)
        with m.Elif(after_first_read):
            m.d.sync += track.eq(track + lanes - times_lanes(skew))
        with m.Else():
            m.d.sync += track.eq(track + lanes)
        wait_now = Signal(range(RQ_FOLLOW_MAX_WAIT + 1))
        m.d.comb += wait_now.eq(follow_wait(rd_addr, track, cfg))
        if lanes == 1:
            with m.If(deciding):
                m.d.sync += [deciding.eq(0), wait_left.eq(wait_now), waiting.eq(wait_now != 0),
                             reading.eq(wait_now == 0), first_read.eq(wait_now == 0)]
        else:
            wait_q = Signal.like(wait_now, name="wait_q")
            with m.If(deciding):
                m.d.sync += [deciding.eq(0), decided.eq(1), wait_q.eq(wait_now)]
            with m.If(decided):
                m.d.sync += [decided.eq(0), wait_left.eq(wait_q), waiting.eq(wait_q != 0),
                             reading.eq(wait_q == 0), first_read.eq(wait_q == 0)]
        with m.If(waiting):
            m.d.sync += wait_left.eq(wait_left - 1)
            with m.If(wait_left == 1):
                m.d.sync += [waiting.eq(0), reading.eq(1), first_read.eq(1)]
        # Lane j reads while the RQ has more than j elements left (only its last cycle may leave lanes idle).
        lane_reading = [reading] + [reading & (rd_left > j) for j in range(1, lanes)]
        with m.If(reading):
            m.d.sync += [addr.eq(addr + lanes) for addr in rd_addrs]
            m.d.sync += [rd_left.eq(rd_left - lanes), reading.eq(rd_left != 1 if lanes == 1 else rd_left > lanes)]
        for rd, en, addr in zip(self.read_ports, lane_reading, rd_addrs):
            m.d.comb += [rd.en.eq(en), rd.addr.eq(addr)]

        # Into the pipelines: the words `skew` cycles after their reads (Requantiser), each RQ's skew and fields
        # taken in its first read's cycle. The valid bits are selected as a read enters the pipeline, the words
        # pipeline.read_latency cycles later, each with the skew of its own RQ.
        entry_mult, entry_shift = Signal.like(mult, name="entry_mult"), Signal.like(shift, name="entry_shift")
        with m.If(first_read):
            m.d.sync += [skew.eq(skew_now), entry_mult.eq(mult), entry_shift.eq(shift)]
        word_skew = delayed(m, skew, pipeline.read_latency, "word_skew")
        taps = [skew_taps(m, en, rd.data, lane=str(j or ""))
                for j, (rd, en) in enumerate(zip(self.read_ports, lane_reading))]
        word_mult = delayed(m, entry_mult, pipeline.read_latency, "word_mult")
        word_shift = delayed(m, entry_shift, pipeline.read_latency, "word_shift")
        for lane_pipeline, (reads_late, words) in zip(pipelines, taps):
            m.d.comb += [lane_pipeline.read.eq(Array(reads_late)[skew]), lane_pipeline.word.eq(Array(words)[word_skew]),
                         lane_pipeline.mult.eq(word_mult), lane_pipeline.shift.eq(word_shift)]

        # Out of the pipelines: a cycle's elements (lane j the j-th) to the RQ being written; the next RQ's
        # destination waits in the queue until its last word. A start on an idle write side loads it directly.
        writing = pipeline.o.valid
        for wr, lane_pipeline, addr in zip(self.write_ports, pipelines, wr_addrs):
            m.d.comb += [wr.en.eq(lane_pipeline.o.valid), wr.addr.eq(addr), wr.data.eq(lane_pipeline.o.payload)]
        written = writing if lanes == 1 else sum(p.o.valid for p in pipelines)     # lanes 0 .. k-1 write
        left_after = Signal.like(wr_left)                  # the writes left once this cycle's are made
        left_next, addr_next = Signal.like(wr_left), Signal.like(wr_addr)
        queued_next = Signal(name="queued_next")
        m.d.comb += [left_after.eq(wr_left - written), left_next.eq(left_after),
                     addr_next.eq(wr_addr + (writing if lanes == 1 else times_lanes(writing))),
                     queued_next.eq(queued)]
        with m.If(self.ctl.start):
            with m.If(draining):
                m.d.sync += [next_dst.eq(instr.dst), next_len.eq(instr.len)]
                m.d.comb += queued_next.eq(1)
            with m.Else():
                m.d.comb += [addr_next.eq(instr.dst), left_next.eq(instr.len)]
        with m.If(queued & (left_after == 0)):
            m.d.comb += [addr_next.eq(next_dst), left_next.eq(next_len), queued_next.eq(0)]
        m.d.sync += [wr_addr.eq(addr_next), wr_left.eq(left_next), queued.eq(queued_next),
                     draining.eq((left_next != 0) | queued_next)]
        m.d.sync += [addr.eq(addr_next + j) for j, addr in enumerate(wr_addrs) if j]
        m.d.comb += self.ctl.done.eq(writing & (wr_left == 1 if lanes == 1 else left_after == 0) & ~queued)
        return m
