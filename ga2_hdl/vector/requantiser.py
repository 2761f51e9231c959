"""The requantiser: executes ``RQ dst src len m s`` (docs/ISA.md), int32 to int8, one element per cycle."""

from types import SimpleNamespace

import functools
import operator

from amaranth.hdl import Array, Module, Mux, Signal, signed
from amaranth.utils import exact_log2

from ga2_sw.banking import RQ_MAX_SKEW, RQ_READ_TO_WRITE

from ..ports import Unit
from .requant_pipeline import SHIFT_WIDTH, RequantPipeline
from ..valid_chain import delayed

__all__ = ["Requantiser", "skew_taps", "window_may_collide", "write_skew"]


def window_may_collide(e, *, banks, lanes, wrap=None):
    """The RTL of ``ga2_sw.banking.rq_window_may_collide``: whether reads of one cycle and writes of that cycle,
    the first read's address ``e`` past the first write's, can share one of the ``banks`` banks, over the
    ``2 lanes - 1`` differences of their lanes. ``wrap``: the differences are taken modulo ``2**wrap`` (a 16-bit
    field's difference: a multiple of ``Nb << b``, so the bank arithmetic is unchanged), else ``e`` is signed."""
    b, nb, w = exact_log2(banks), banks, lanes

    def may_collide(x):
        v = (x + ((x.as_signed() if wrap else x) >> b))[:b]
        return (v == 0) | (v == nb - 1)
    near = [e if d == 0 else (e + d)[:wrap] if wrap else e + d for d in range(1 - w, w)]
    return functools.reduce(operator.or_, map(may_collide, near))


def write_skew(src, dst, *, banks, lanes):
    """The RTL of ``ga2_sw.banking.rq_write_skew``: the cycles the decoupled requantiser (of ``lanes`` lanes, on
    ``banks`` banks) delays its writes by so that a write never reaches a bank read in the same cycle
    (0 .. ``RQ_MAX_SKEW``). Only ``src - dst`` modulo ``2**16`` matters (a multiple of ``Nb << b``), so 16-bit
    fields may be read as signed."""
    w = lanes
    e = src.as_signed() - dst.as_signed() + w * RQ_READ_TO_WRITE
    assert RQ_MAX_SKEW == 2, "the choice below covers skews 0, 1 and 2"
    may_collide = [window_may_collide(e + w * skew, banks=banks, lanes=lanes) for skew in range(2)]
    return Mux(~may_collide[0], 0, Mux(~may_collide[1], 1, 2))


def skew_taps(m, reading, word, lane=""):
    """The delay lines a decoupled requantiser selects its skew from: the read valid bits tapped one register
    late (``reads_late[n]`` is ``reading`` ``n + 1`` cycles ago, ``n <= RQ_MAX_SKEW``) and the read words
    (``words[n]`` is ``word`` ``n`` cycles ago); ``lane`` names a lane's copies."""
    reads_late, words = [], [word]
    for n in range(RQ_MAX_SKEW + 1):
        reads_late.append(delayed(m, reading if n == 0 else reads_late[-1], 1, f"read{lane}_d{n + 1}"))
    for n in range(RQ_MAX_SKEW):
        words.append(delayed(m, words[-1], 1, f"word{lane}_d{n + 1}"))
    return reads_late, words


class Requantiser(Unit):
    """Executes RQ: ``sp[dst+i] = requant(s32(sp[src+i]), m, s)``, written sign-extended to 32 bits.

    This unit walks the addresses and keeps the handshake; the arithmetic is :class:`RequantPipeline`'s,
    one element per cycle. With the start pulse in cycle 0, element ``i`` is read (``sp_rd`` at ``src+i``)
    in cycle ``1+i`` and written (``sp_wr`` at ``dst+i``) in cycle ``1+RQ_DEPTH+i`` (``ga2_sw.timing``).
    ``busy`` is high in cycles ``1 .. len+RQ_DEPTH`` (X = ``len + RQ_DEPTH``) and ``done`` in the last of them
    only. The checker lets the destination be the source or disjoint from it
    (``ga2_sw.isa.rq_overlaps_partly``), so no element reads a word this instruction writes before it reads
    it, whatever the pipeline's depth.

    Decoupled, the scratchpad is banked and registers each of the vector lane's read requests twice before the
    memory (the announce and request registers), the word read at the bank and the word selected from the banks
    (``ga2_sw.timing``): every element is written four cycles later and ``busy`` lasts four cycles longer
    (``ga2_sw.timing.rq_latency``). An RQ whose read and write of one cycle could share a bank also delays its
    words by ``skew`` cycles between the scratchpad and the pipeline's word register
    (``ga2_sw.banking.rq_write_skew``, 0 to 2, computed in cycle 1 from the latched ``src - dst`` and
    registered, used from cycle 2 on): every write then comes ``skew`` cycles later and ``busy`` lasts
    ``len + RQ_DEPTH + 4 + skew`` cycles.

    The instruction fields are latched at ``start``: ``dst``, ``src``, ``len``, ``m`` (signed 16-bit, in the
    K slot) and ``s`` (the low 6 bits of the M slot, 0 .. 47; the sequencer rejects larger shifts).

    Its members are those of every :class:`ga2_hdl.ports.Unit`.

    Parameters
    ----------
    addr_width :
        The scratchpad address's width.
    read_latency :
        Cycles from a read request to its data (``ga2_sw.timing.vector_read_latency``).
    banks :
        The banks of the decoupled chip's scratchpad; None for the in-order chip's one memory.
    """

    def __init__(self, *, addr_width, read_latency, banks=None):
        self._read_latency, self._banks = read_latency, banks
        super().__init__(addr_width=addr_width)

    def elaborate(self, platform):
        m = Module()
        instr = self.ctl.instr
        decoupled = self._banks is not None
        # Decoupled, the read's valid bit passes one register of ours before the pipeline (below), so the
        # pipeline's own chain is a cycle shorter: the latency from read request to result is the same.
        read_latency = self._read_latency
        m.submodules.pipeline = pipeline = RequantPipeline(read_latency=read_latency - 1 if decoupled else read_latency)
        latency = pipeline.latency + (1 if decoupled else 0)    # ga2_sw.timing.rq_latency: the pipeline checks it

        # the signals the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(instr=instr, decoupled=decoupled, pipeline=pipeline, latency=latency)
        self._control(m, s)
        self._reads(m, s)
        self._writes(m, s)
        return m

    def _control(self, m, s):
        """The fields, loaded while idle, the cycle count and the read side's registers; ``start`` drives only
        ``busy`` and ``reading``."""
        # Fields, loaded while idle (below).
        dst = Signal.like(s.instr.dst, name="dst")
        mult = Signal(signed(16), name="mult")
        shift = Signal(SHIFT_WIDTH, name="shift")

        # The cycle number relative to the start pulse: busy ends at len + the pipeline's latency (+ skew)
        # whatever the data path does.
        step = Signal(len(s.instr.len) + 1, name="step")
        last_step = Signal(len(s.instr.len) + 1, name="last_step")
        # The read side is all registers: the address and the enable go straight into the scratchpad's read
        # port (an adder and a compare in front of it were the in-order chip's critical path).
        rd_addr = Signal.like(s.instr.src, name="rd_addr")
        rd_left = Signal.like(s.instr.len, name="rd_left")
        reading = Signal(name="reading")
        wr_index = Signal.like(s.instr.len, name="wr_index")
        busy = Signal(name="busy_r")
        m.d.comb += [self.ctl.busy.eq(busy), self.ctl.done.eq(busy & (step == last_step))]
        # Idle, the fields follow the instruction register, which holds the instruction in the start cycle (the
        # last idle one): `start`, the end of the issue decision, drives only `busy` and `reading`.
        with m.If(~busy):
            m.d.sync += [dst.eq(s.instr.dst), mult.eq(s.instr.m), shift.eq(s.instr.s),
                         last_step.eq(s.instr.len + s.latency), step.eq(1), rd_addr.eq(s.instr.src),
                         rd_left.eq(s.instr.len), wr_index.eq(0)]
        with m.If(self.ctl.start):
            m.d.sync += [reading.eq(1), busy.eq(1)]         # len >= 1: the checker faults an empty RQ
        with m.Elif(busy):
            m.d.sync += step.eq(step + 1)
            with m.If(self.ctl.done):
                m.d.sync += busy.eq(0)
        s.__dict__.update(dst=dst, mult=mult, shift=shift, step=step, last_step=last_step, rd_addr=rd_addr,
                          rd_left=rd_left, reading=reading, wr_index=wr_index, busy=busy)

    def _reads(self, m, s):
        """Cycle 1+i: element i read into the pipeline (decoupled, at the RQ's write skew)."""
        # Cycle 1+i: read element i into the pipeline.
        m.d.comb += [
            self.sp_rd.en.eq(s.reading),
            self.sp_rd.addr.eq(s.rd_addr),
            s.pipeline.mult.eq(s.mult),
            s.pipeline.shift.eq(s.shift),
        ]
        if s.decoupled:
            # The banked scratchpad serves one access per bank and port a cycle: where a write could reach the
            # bank being read, the words enter the pipeline `skew` cycles after their read, which delays every
            # write by as much (ga2_sw.banking.rq_write_skew). The delay sits between the block RAM and the
            # pipeline's first register, away from the round-and-clamp path into the write port.
            # The skew is computed in cycle 1 from the latched src (rd_addr) and dst and registered; nothing
            # uses it before cycle 2. Computed from the sequencer's instruction bus in the start cycle it was
            # the decoupled chip's critical path (85.8 MHz on a 45F); selecting the words straight from its
            # adders the next (74.5 MHz); adding it to last_step in cycle 1 the next (73.7 MHz). So the read
            # valid bits are tapped one register late (reads_late[n] is `reading` n + 1 cycles ago): the first
            # read's bit is chosen in cycle 2, with the skew of this RQ, and the pipeline's own chain is one
            # register shorter to keep the latency.
            skew_now, skew = Signal(range(RQ_MAX_SKEW + 1)), Signal(range(RQ_MAX_SKEW + 1), name="skew")
            m.d.comb += skew_now.eq(write_skew(s.rd_addr, s.dst, banks=self._banks, lanes=1))
            with m.If(s.busy & (s.step == 1)):
                m.d.sync += skew.eq(skew_now)
            with m.If(s.busy & (s.step == 2)):
                m.d.sync += s.last_step.eq(s.last_step + skew)
            reads_late, words = skew_taps(m, s.reading, self.sp_rd.data)
            m.d.comb += [s.pipeline.read.eq(Array(reads_late)[skew]), s.pipeline.word.eq(Array(words)[skew])]
        else:
            m.d.comb += [s.pipeline.read.eq(s.reading), s.pipeline.word.eq(self.sp_rd.data)]
        with m.If(s.reading):
            m.d.sync += [s.rd_addr.eq(s.rd_addr + 1), s.rd_left.eq(s.rd_left - 1), s.reading.eq(s.rd_left != 1)]

    def _writes(self, m, s):
        """Cycle 1+RQ_DEPTH+i: element i written, the int8 result sign-extended to the word."""
        # Cycle 1+RQ_DEPTH+i: write element i; the int8 result is sign-extended to the word.
        m.d.comb += [
            self.sp_wr.en.eq(s.pipeline.o.valid),
            self.sp_wr.addr.eq(s.dst + s.wr_index),
            self.sp_wr.data.eq(s.pipeline.o.payload),
        ]
        with m.If(s.pipeline.o.valid):
            m.d.sync += s.wr_index.eq(s.wr_index + 1)
