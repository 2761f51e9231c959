"""Instruction validation at load time: the error code of every instruction-memory word, computed as the
host writes it, so that the sequencer's issue path only reads a 3-bit code."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from ga2_sw.isa import Err, INSTR_BITS, units_of
from ga2_sw.timing import CHECK_LATENCY

from .check_operands import CheckOperands
from .check_payloads import RANGES
from .check_ranges import CheckRanges
from ..ports import access_layout, address_width

__all__ = ["InstrChecker", "CHECK_LATENCY"]


class InstrChecker(wiring.Component):
    """Validates instruction words against the chip's sizes and features (docs/ISA.md, "Validation and error codes").

    The check depends only on the word and on fixed sizes, so it runs in a pipeline beside the instruction
    memory's write port: :class:`CheckOperands` registers the word, then its ILLEGAL, SHAPE and OVERLAP
    verdicts and the operands of its ranges; :class:`CheckRanges` the footprint products, then the extreme
    addresses; then these are compared with the memory sizes and the code is written (``err_we``),
    ``CHECK_LATENCY`` cycles after the host's write. Doing it at issue time instead put an instruction-memory
    read, a multiplier and two adders in series, which held the whole chip to about 40 MHz on ECP5.

    Parameters: the instruction memory's ``imem_words``; the scratchpad's ``sp_words`` and the external memory's
    ``ext_words``, which every range must lie within; the largest MM, ``rows`` x ``cols``; the longest vector
    row, ``sm_max_len``; the chip's ``features`` (a set of ``ga2_sw.isa.Feature``); on a decoupled AXI4 chip
    (``ga2_hdl.dma.burst_plan.precomputed``) the port's ``bus_bytes``, the DMA's ``plan_layout`` and the
    ``page_beats`` of a 4 KiB page, so that each LD's and ST's burst plan is worked out here.

    Members
    -------
    we, addr, word : In
        The host's instruction-memory write.
    err_we, err_addr : Out
        Write of the code into the error memory, ``CHECK_LATENCY`` cycles after the host's write.
    err : Out(3)
        ``ga2_sw.isa.Err`` code of the word.
    access : Out(access_layout(address_width(sp_words)))
        The word's scratchpad ranges and whether each is read or written (``ga2_sw.cycles.accesses``),
        valid with ``err_we`` when ``err`` is 0: the decoupled scoreboard compares them.
    units : Out(len(units_of(features)))
        The unit the word starts (one bit per ``ga2_sw.isa.units_of(features)``), valid with ``err_we``; none when it faults
        or halts. Decoupled, the sequencer's issue logic starts from these bits.
    busy : Out(1)
        A word is still in the pipeline.
    dma : Out(plan_layout)
        With a ``plan_layout``: an LD's or ST's beats, first burst and last
        beat, valid with ``err_we``; the sequencer keeps them beside the word for the DMA.
    """

    def __init__(self, *, imem_words, sp_words, ext_words, rows, cols, sm_max_len, features=frozenset(),
                 bus_bytes=1, plan_layout=None, page_beats=None):
        self.imem_words, self.features, self.plan_layout = imem_words, frozenset(features), plan_layout
        self._operands = dict(imem_words=imem_words, rows=rows, cols=cols, sm_max_len=sm_max_len,
                              features=self.features)
        self._ranges = dict(imem_words=imem_words, sp_words=sp_words, ext_words=ext_words, features=self.features,
                            bus_bytes=bus_bytes, plan_layout=plan_layout, page_beats=page_beats)
        aw = address_width(imem_words)
        super().__init__({"we": In(1), "addr": In(aw), "word": In(INSTR_BITS),
                          "err_we": Out(1), "err_addr": Out(aw), "err": Out(3), "busy": Out(1),
                          "access": Out(access_layout(address_width(sp_words))),
                          "units": Out(len(units_of(self.features))),
                          **({"dma": Out(plan_layout)} if plan_layout is not None else {})})

    def elaborate(self, platform):
        m = Module()
        m.submodules.operands = operands = CheckOperands(**self._operands)
        m.submodules.ranges = ranges = CheckRanges(**self._ranges)
        if operands.latency + ranges.latency != CHECK_LATENCY:
            raise AssertionError(f"The checker's stages add up to {operands.latency} + {ranges.latency} cycles "
                                 f"where the cycle model (ga2_sw.timing) says CHECK_LATENCY = {CHECK_LATENCY}")
        m.d.comb += [operands.i.valid.eq(self.we), operands.i.payload.addr.eq(self.addr),
                     operands.i.payload.word.eq(self.word)]
        connect(m, operands=operands.o, ranges=ranges.i)
        ends = ranges.o.payload

        # Stage 5 (combinational into the error memory's write port): rank the verdicts.
        sp_out = ends.a.over | ends.b.over | ends.c.over
        ext_out = ends.ext_over
        aw = len(self.access.a.lo)
        for r in RANGES:
            end, out = getattr(ends, r), getattr(self.access, r)
            m.d.comb += [out.rd.eq(end.rd), out.wr.eq(end.wr), out.lo.eq(end.lo[:aw]), out.hi.eq(end.hi[:aw])]
        err = Signal(3)
        m.d.comb += [
            self.err_we.eq(ranges.o.valid), self.err_addr.eq(ends.tag.addr),
            err.eq(Mux(ends.tag.stray, Err.ILLEGAL, Mux(ends.tag.bad_shape, Err.SHAPE,
                   Mux(ends.tag.overlap, Err.OVERLAP,
                       Mux(sp_out, Err.SP_RANGE, Mux(ext_out, Err.EXT_RANGE, Err.NONE)))))),
            self.err.eq(err),
            *([self.dma.eq(ends.dma)] if self.plan_layout is not None else []),
            self.units.eq(Mux(err == Err.NONE, ends.tag.units, 0)),
            self.busy.eq(operands.busy | ranges.busy),
        ]
        return m
