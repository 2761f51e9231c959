"""The requantiser of a chip built with ``Config.rq_overlap``: an RQ may start while the RQ before it is still
writing, so a run of RQs keeps the pipeline full instead of draining it between instructions."""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib.wiring import Out

from ga2_sw.banking import RQ_FOLLOW_MAX_WAIT, RQ_MAX_SKEW, RQ_READ_TO_WRITE, bank_bits
from ga2_sw.timing import BANKED_READ_DELAY, SP_WRITE_DELAY, rq_latency, vector_read_latency

from .ports import Unit
from .requant_pipeline import SHIFT_WIDTH, RequantPipeline
from .requantiser import skew_taps, write_skew
from .valid_chain import delayed

__all__ = ["OverlappedRequantiser", "follow_wait"]


def may_collide(e, config):
    """The RTL of ``ga2_sw.banking.may_collide`` on a 16-bit difference (a multiple of ``Nb << b`` wraps it)."""
    b, nb = bank_bits(config), config.sp_banks
    v = (e + (e.as_signed() >> b))[:b]
    return (v == 0) | (v == nb - 1)


def follow_wait(src, track, config):
    """The RTL of ``ga2_sw.banking.rq_follow_wait``, decided in the cycle after the start: ``track`` is the write
    track of the RQ before (``banking.rq_write_track``) in this cycle, so reading from ``w + 1`` cycles on meets
    its word ``track + 1 + w``."""
    assert RQ_FOLLOW_MAX_WAIT == 2, "the choice below covers waits 0, 1 and 2"
    diff = [(src - (track + 1 + w))[:16] for w in range(RQ_FOLLOW_MAX_WAIT + 1)]
    return Mux(~may_collide(diff[0], config), 0, Mux(~may_collide(diff[1], config), 1, 2))


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
    """

    def __init__(self, config):
        if not config.rq_overlap:
            raise ValueError("OverlappedRequantiser is the requantiser of chips built with rq_overlap = 1")
        super().__init__(config, {"older": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg, instr = self._config, self.ctl.instr
        read_latency = vector_read_latency(cfg)
        m.submodules.pipeline = pipeline = RequantPipeline(read_latency - 1, carry_fields=True)
        # The valid bits pass one register of ours (read_d1) before the pipeline, as in the Requantiser.
        assert 1 + pipeline.latency == rq_latency(cfg), "an element's write request comes rq_latency after its read's"
        # The write track counts from requests: a read request and a write request pass as many registers
        # before the bank (the announce register, then the request or write register).
        assert RQ_READ_TO_WRITE == rq_latency(cfg) and BANKED_READ_DELAY == SP_WRITE_DELAY, \
            "the write track's lag (banking.rq_write_track) is the requantiser's latency"

        # The read side: the RQ being read. Its fields follow the instruction register while it is idle, as the
        # Requantiser's do, so the start pulse drives only the state bits.
        dst = Signal.like(instr.dst, name="dst")
        mult = Signal(pipeline.mult.shape(), name="mult")
        shift = Signal(SHIFT_WIDTH, name="shift")
        rd_addr = Signal.like(instr.src, name="rd_addr")
        rd_left = Signal.like(instr.len, name="rd_left")
        deciding, waiting, reading = Signal(name="deciding"), Signal(name="waiting"), Signal(name="reading")
        wait_left = Signal(range(RQ_FOLLOW_MAX_WAIT + 1), name="wait_left")
        first_read = Signal(name="first_read")          # this cycle reads an RQ's first element

        # The write side: the RQ being written, and the one behind it.
        wr_addr = Signal.like(instr.dst, name="wr_addr")
        wr_left = Signal(len(instr.len) + 1, name="wr_left")
        queued = Signal(name="queued")
        next_dst = Signal.like(instr.dst, name="next_dst")
        next_len = Signal.like(instr.len, name="next_len")
        draining = Signal(name="draining_r")

        read_idle = ~(deciding | waiting | reading)
        m.d.comb += [self.ctl.busy.eq(deciding | waiting | reading | queued), self.ctl.draining.eq(draining),
                     self.older.eq(queued)]
        with m.If(read_idle):
            m.d.sync += [dst.eq(instr.dst), mult.eq(instr.m), shift.eq(instr.s),
                         rd_addr.eq(instr.src), rd_left.eq(instr.len)]

        # Start: on an idle unit read from the next cycle; beside an RQ still writing, decide first.
        with m.If(self.ctl.start):
            m.d.sync += [deciding.eq(draining), reading.eq(~draining), first_read.eq(~draining)]
        with m.Else():
            m.d.sync += first_read.eq(0)
        # The write track (banking.rq_write_track) of the RQ read last: the word it writes in the cycle in which
        # a read requested now reaches the bank. One more each cycle; set as an RQ reads its first element, and
        # its skew taken off in the next cycle, from the skew register: loaded with the skew computed from the
        # fields in that cycle, the track was the chip's critical path (rq.rd_addr -> rq.track, 11.2 ns, 89.03 MHz
        # on a 25F). Nothing reads it before a following RQ's decision, two cycles after the first read at least.
        track = Signal(16, name="track")
        skew_now, skew = Signal(range(RQ_MAX_SKEW + 1)), Signal(range(RQ_MAX_SKEW + 1), name="skew")
        m.d.comb += skew_now.eq(write_skew(rd_addr, dst, cfg))
        after_first_read = Signal(name="after_first_read")
        m.d.sync += after_first_read.eq(first_read)
        with m.If(first_read):
            m.d.sync += track.eq(dst - RQ_READ_TO_WRITE + 1)
        with m.Elif(after_first_read):
            m.d.sync += track.eq(track + 1 - skew)
        with m.Else():
            m.d.sync += track.eq(track + 1)
        wait_now = Signal(range(RQ_FOLLOW_MAX_WAIT + 1))
        m.d.comb += wait_now.eq(follow_wait(rd_addr, track, cfg))
        with m.If(deciding):
            m.d.sync += [deciding.eq(0), wait_left.eq(wait_now), waiting.eq(wait_now != 0),
                         reading.eq(wait_now == 0), first_read.eq(wait_now == 0)]
        with m.If(waiting):
            m.d.sync += wait_left.eq(wait_left - 1)
            with m.If(wait_left == 1):
                m.d.sync += [waiting.eq(0), reading.eq(1), first_read.eq(1)]
        with m.If(reading):
            m.d.sync += [rd_addr.eq(rd_addr + 1), rd_left.eq(rd_left - 1), reading.eq(rd_left != 1)]
        m.d.comb += [self.sp_rd.en.eq(reading), self.sp_rd.addr.eq(rd_addr)]

        # Into the pipeline: the words `skew` cycles after their reads (Requantiser), each RQ's skew and fields
        # taken in its first read's cycle. The valid bits are selected as a read enters the pipeline, the words
        # pipeline.read_latency cycles later, each with the skew of its own RQ.
        entry_mult, entry_shift = Signal.like(mult, name="entry_mult"), Signal.like(shift, name="entry_shift")
        with m.If(first_read):
            m.d.sync += [skew.eq(skew_now), entry_mult.eq(mult), entry_shift.eq(shift)]
        word_skew = delayed(m, skew, pipeline.read_latency, "word_skew")
        reads_late, words = skew_taps(m, reading, self.sp_rd.data)
        m.d.comb += [pipeline.read.eq(Array(reads_late)[skew]), pipeline.word.eq(Array(words)[word_skew]),
                     pipeline.mult.eq(delayed(m, entry_mult, pipeline.read_latency, "word_mult")),
                     pipeline.shift.eq(delayed(m, entry_shift, pipeline.read_latency, "word_shift"))]

        # Out of the pipeline: element after element to the RQ being written; the next RQ's destination waits in
        # the queue until its last word. A start on an idle write side loads it directly.
        writing = pipeline.o.valid
        m.d.comb += [self.sp_wr.en.eq(writing), self.sp_wr.addr.eq(wr_addr), self.sp_wr.data.eq(pipeline.o.payload)]
        left_after = Signal.like(wr_left)                  # the writes left once this cycle's is made
        left_next, addr_next, queued_next = Signal.like(wr_left), Signal.like(wr_addr), Signal()
        m.d.comb += [left_after.eq(wr_left - writing), left_next.eq(left_after), addr_next.eq(wr_addr + writing),
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
        m.d.comb += self.ctl.done.eq(writing & (wr_left == 1) & ~queued)
        return m
