"""The arithmetic of an AXI4 LD's or ST's bursts (``ga2_sw.packing.beats`` and ``bursts`` in gates), shared by the
AXI DMA and, on a decoupled chip, the instruction checker, which works out each word's beat count, first
burst and last beat when the host writes it (``precomputed``): computed from the instruction register when the
DMA takes the instruction, the address mux, the beat count's adder and the first burst's two comparisons were
in series, the AXI chip's critical path (53.82 MHz median on a 25F)."""

from amaranth.hdl import Cat, Const, Mux, unsigned
from amaranth.lib import data
from amaranth.utils import exact_log2

from ga2_sw.packing import AXI_MAX_BURST, AXI_PAGE_BYTES, beat_bytes

from ..ports import ext_beat_addr_width

__all__ = ["BEATS_WIDTH", "precomputed", "plan_layout", "lane_bits", "page_beats", "beat_count", "first_to_page",
           "shortest"]

BEATS_WIDTH = 17            # beats of an LD or ST: up to 65,535 elements plus a partial beat at each end


def precomputed(config):
    """Whether ``config``'s checker works out the plan at load time (the decoupled chip's, whose sequencer
    keeps each word's checker results beside it); in order, the DMA works it out from the instruction."""
    return bool(config.axi) and config.decoupled


def plan_layout(config):
    """An LD's or ST's ``beats``, its ``first_burst``'s beats and its ``last_beat``."""
    return data.StructLayout({"beats": BEATS_WIDTH, "first_burst": unsigned(exact_log2(AXI_MAX_BURST) + 1),
                              "last_beat": ext_beat_addr_width(config)})


def lane_bits(config):
    return exact_log2(config.bus_bytes)


def page_beats(config):
    """Beats in a 4 KiB page."""
    return AXI_PAGE_BYTES // beat_bytes(config)


def beat_count(ext_addr, tail, *, bus_bytes):
    """Beats of ``tail + 1`` elements from external address ``ext_addr`` on a port of W = ``bus_bytes``:
    ``ceil((lane + tail + 1) / W)``."""
    lb = exact_log2(bus_bytes)
    first_lane = ext_addr[:lb] if lb else Const(0, 1)
    return ((first_lane + tail + bus_bytes) >> lb)[:BEATS_WIDTH]


def first_to_page(first_beat, *, page_beats):
    """Beats from ``first_beat`` to the end of its page of ``page_beats`` (``page_beats(config)``)."""
    page_bits = exact_log2(page_beats)
    return page_beats - Cat(first_beat, Const(0, page_bits))[:page_bits]


def shortest(left, to_page):
    """Beats of a burst with ``left`` beats to go and ``to_page`` to the page's end (``packing.bursts``)."""
    n = Mux(left < to_page, left, to_page)
    return Mux(n > AXI_MAX_BURST, AXI_MAX_BURST, n)
