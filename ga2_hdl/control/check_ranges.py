"""The instruction checker's range arithmetic: the footprint products, then each range's extreme address."""

from amaranth.hdl import Module, Mux, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from amaranth.utils import exact_log2

from ga2_sw.isa import Feature

from ..dma.burst_plan import BEATS_WIDTH, beat_count, first_to_page, shortest
from .check_payloads import (EXT_RANGE_WIDTH, RANGE_WIDTH, RANGES, RESET_LESS, ends_layout, operands_layout, pipeline_reg,
                             row_b_flags, tag_layout)
from ..valid_chain import ValidChain

__all__ = ["CheckRanges"]


def _sums_layout(imem_words, features, page_beats=None):
    """Stage 3: ``base + tail`` and the product ``x*y`` of each range, apart: a multiplier alone in its stage;
    with an AXI DMA plan (``burst_plan.precomputed``), the LD's or ST's beats and its first beat's distance to
    the page's end."""
    rng = data.StructLayout({"start": signed(RANGE_WIDTH + 2), "start_over": signed(RANGE_WIDTH + 3),
                             "prod": signed(RANGE_WIDTH), "lo": RANGE_WIDTH, "rd": 1, "wr": 1})
    plan = {"beats": BEATS_WIDTH, "to_page": range(page_beats + 1)} if page_beats is not None else {}
    # An RQ's OVERLAP verdict in three terms (ANDed in stage 4): it moves (dst != src), its destination starts
    # within len words after the source, its source within len words after the destination.
    overlap = data.StructLayout({"moves": 1, "dst_within": 1, "src_within": 1})
    return data.StructLayout({"tag": tag_layout(imem_words, features), "overlap": overlap, **{r: rng for r in RANGES},
                              "ext_end": signed(EXT_RANGE_WIDTH), **plan, **row_b_flags(features)})


class CheckRanges(wiring.Component):
    """Stage 3 registers each range's ``base + tail`` and its footprint product ``x * y``, from registers into
    registers (a multiplier alone in its stage), and the three terms of an RQ's OVERLAP verdict; stage 4
    registers the verdict (their AND), ``hi``, their sum, and whether it lies beyond the scratchpad (the sign of
    ``base + tail - sp_words + x * y``, one adder from registers, as ``hi`` is; comparing ``hi`` with the size
    after its register put a second carry chain and the verdicts' priority in front of the error memory: 97.4 MHz
    on a 25F). The external range's end is compared with ``ext_words`` in stage 4 too. The verdicts, ``lo`` and
    the read/written flags ride along.

    Parameters: the instruction memory's ``imem_words``, the memories' ``sp_words`` and ``ext_words``, the chip's
    ``features`` (a set of ``ga2_sw.isa.Feature``); on a decoupled AXI4 chip the DMA's ``plan_layout``, the
    port's ``bus_bytes`` and the ``page_beats`` of a page (``ga2_hdl.dma.burst_plan``), whose plan is worked
    out here.

    Members
    -------
    i : In(stream.Signature(operands_layout(imem_words, features), always_ready=True))
    o : Out(stream.Signature(ends_layout(imem_words, features, plan_layout), always_ready=True))
        The ranges' extreme addresses, ``latency`` cycles after the operands.
    busy : Out(1)
        A word is in one of the stages.
    """

    latency = 2

    def __init__(self, *, imem_words, sp_words, ext_words, features=frozenset(), bus_bytes=1, plan_layout=None,
                 page_beats=None):
        if (plan_layout is None) != (page_beats is None):
            raise ValueError("A burst plan needs both its plan_layout and page_beats")
        self._imem_words, self._features = imem_words, frozenset(features)
        self._sp_words, self._ext_words, self._bus_bytes = sp_words, ext_words, bus_bytes
        self._plan_layout, self._page_beats = plan_layout, page_beats
        super().__init__({"i": In(stream.Signature(operands_layout(imem_words, self._features), always_ready=True)),
                          "o": Out(stream.Signature(ends_layout(imem_words, self._features, plan_layout),
                                                    always_ready=True)),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        ops = self.i.payload
        planned, row_b = self._plan_layout is not None, Feature.ROW_B in self._features
        sums = pipeline_reg(_sums_layout(self._imem_words, self._features, self._page_beats), "sums")
        ends = pipeline_reg(ends_layout(self._imem_words, self._features, self._plan_layout), "ends")
        chain = ValidChain(m, self.i.valid, reset_less=RESET_LESS)

        # Stage 3: the products beside base + tail.
        # OVERLAP: an RQ whose destination is neither its source nor at least len = tail + 1 words away; its
        # terms here, their AND in stage 4 (the two comparisons and the AND in one stage were a 25F seed's worst
        # path, 10.1 ns).
        sp_words, ext_words = self._sp_words, self._ext_words
        stage = [sums.tag.eq(ops.tag), sums.overlap.moves.eq(ops.is_rq & (ops.dst_ahead != 0)),
                 sums.overlap.dst_within.eq(ops.dst_ahead <= ops.a.tail),
                 sums.overlap.src_within.eq(ops.src_ahead <= ops.a.tail),
                 sums.ext_end.eq(ops.ext_base + ops.ext_tail)]
        for r in RANGES:
            x, y = getattr(ops, r), getattr(sums, r)
            stage += [y.start.eq(x.base + x.tail), y.start_over.eq(x.base + x.tail - sp_words),
                      y.prod.eq(x.x * x.y), y.lo.eq(x.base), y.rd.eq(x.rd), y.wr.eq(x.wr)]
        if planned:     # an LD's or ST's burst plan (burst_plan.py), for the AXI DMA
            lb, bw = exact_log2(self._bus_bytes), len(ends.dma.last_beat)
            stage += [sums.beats.eq(beat_count(ops.ext_base, ops.ext_tail, bus_bytes=self._bus_bytes)),
                      sums.to_page.eq(first_to_page(ops.ext_base[lb:lb + bw], page_beats=self._page_beats))]
        if row_b:
            stage += [sums.rb.eq(ops.rb), sums.sa.eq(ops.sa)]
        chain.stage("sums", *stage)

        # Stage 4: the extreme addresses, and whether they lie beyond the memories.
        terms = sums.overlap
        stage = [ends.tag.eq(sums.tag), ends.tag.overlap.eq(terms.moves & terms.dst_within & terms.src_within),
                 ends.ext_over.eq(sums.ext_end >= ext_words)]
        for r in RANGES:
            x, y = getattr(sums, r), getattr(ends, r)
            prod = x.prod
            if r == "a" and row_b:
                # With sa, A's range is row 0's: its product (M-1)*lda left out (ga2_sw.isa.footprints).
                prod = Mux(sums.sa, 0, x.prod)
            end, end_over = x.start + prod, x.start_over + prod
            if r == "b" and row_b:
                # With rb, B's range spans every row's B: A's product (M-1)*lda further (ga2_sw.isa.footprints).
                rows_b = Mux(sums.rb, sums.a.prod, 0)
                end, end_over = end + rows_b, end_over + rows_b
            stage += [y.hi.eq(end), y.over.eq(end_over >= 0), y.lo.eq(x.lo), y.rd.eq(x.rd), y.wr.eq(x.wr)]
        if planned:
            stage += [ends.dma.beats.eq(sums.beats), ends.dma.first_burst.eq(shortest(sums.beats, sums.to_page)),
                      ends.dma.last_beat.eq(sums.ext_end[lb:lb + bw])]
        chain.stage("ends", *stage)
        chain.check(self.latency, "The checker's range arithmetic")

        m.d.comb += [self.o.valid.eq(chain.valid), self.o.payload.eq(ends), self.busy.eq(chain.busy)]
        return m
