"""What the instruction checker's stages (``checker.py``) hand each other, and how their registers are made.

Each scratchpad range of an instruction is ``base + x*y + tail`` (``lo = base``, ``hi`` that sum); LD/ST add
one external range, ``ext_base + ext_tail``. With a bad shape the operands may be negative; the shape error
outranks the range errors, so their values do not matter then."""

from amaranth.hdl import Cat, Signal, Value, signed
from amaranth.lib import data

from ga2_sw.isa import EXT_ADDR_BITS, INSTR_BITS, Feature, units_of

from ..ports import address_width
from ..dma.word_stores import tail_width

__all__ = ["RESET_LESS", "RANGES", "RANGE_WIDTH", "EXT_RANGE_WIDTH", "pipeline_reg", "tag_layout", "word_layout",
           "operands_layout", "ends_layout", "row_b_flags"]

# The checker's pipeline is reset-less: a reset right after the host's last write must not drop the word's
# code, or the error memory would keep the previous word's code for it.
RESET_LESS = True
RANGES = "abc"          # the scratchpad ranges of ga2_hdl.ports.access_layout
RANGE_WIDTH = 30        # wide enough for any base + x*y + tail of 16-bit fields
EXT_RANGE_WIDTH = EXT_ADDR_BITS + 2     # an external address plus a 16-bit tail, signed


def pipeline_reg(shape, name):
    """A register of the checker's pipeline. A struct gets one register per field, viewed as the struct: Yosys
    narrows each field's register to the bits it can take (the sign-extension copies of an operand, the
    top of a product), which it cannot do inside one wide register (that cost the checker 8% of its area)."""
    if not isinstance(shape, data.StructLayout):
        return Signal(shape, name=name, reset_less=RESET_LESS)
    fields = [pipeline_reg(field.shape, f"{name}_{key}")
              for key, field in sorted(shape, key=lambda item: item[1].offset)]
    return data.View(shape, Cat(*(Value.cast(f) for f in fields)))


def tag_layout(imem_words, features):
    """The word's instruction-memory address, its ILLEGAL, SHAPE and OVERLAP verdicts (OVERLAP from stage 3
    on) and the unit its opcode starts (one bit per ``ga2_sw.isa.units_of(features)``, none for HALT), carried
    to the last stage."""
    return data.StructLayout({"addr": address_width(imem_words), "stray": 1, "bad_shape": 1, "overlap": 1,
                              "units": len(units_of(features))})


def word_layout(imem_words):
    """The host's instruction-memory write."""
    return data.StructLayout({"addr": address_width(imem_words), "word": INSTR_BITS})


def operands_layout(imem_words, features):
    """Stage 2: the verdicts, and each range's base, tail, the factors of its footprint product and whether
    it is read and/or written (``ga2_sw.cycles.accesses``)."""
    rng = data.StructLayout({"base": RANGE_WIDTH, "x": signed(17), "y": 12, "tail": signed(18), "rd": 1, "wr": 1})
    # RQ: dst - src and src - dst, for the OVERLAP verdict of the next stage (tag.overlap is set there).
    # MM's rb (row_b chips): B's range ends A's product (M-1)*lda further on; sa: A's range leaves it out
    # (ga2_sw.isa.footprints).
    tail = signed(tail_width(st_words=Feature.WORD_STORES in features))
    return data.StructLayout({"tag": tag_layout(imem_words, features), **{r: rng for r in RANGES},
                              "ext_base": EXT_ADDR_BITS, "ext_tail": tail, "is_rq": 1,
                              "dst_ahead": signed(17), "src_ahead": signed(17), **row_b_flags(features)})


def row_b_flags(features):
    """MM's rb and sa, carried through the checker's stages on row_b chips (none elsewhere)."""
    return {"rb": 1, "sa": 1} if Feature.ROW_B in features else {}


def ends_layout(imem_words, features, plan_layout=None):
    """Stage 4: the verdicts, each range's extreme addresses (``hi`` may exceed the memory) and whether it does
    (``over``: ``hi >= sp_words``; ``ext_over``: the external range's end ``>= ext_words``); with an AXI DMA
    plan (``plan_layout``, ``burst_plan.precomputed``), the LD's or ST's ``dma`` plan."""
    rng = data.StructLayout({"lo": RANGE_WIDTH, "hi": signed(RANGE_WIDTH + 3), "over": 1, "rd": 1, "wr": 1})
    plan = {"dma": plan_layout} if plan_layout is not None else {}
    return data.StructLayout({"tag": tag_layout(imem_words, features), **{r: rng for r in RANGES}, "ext_over": 1,
                              **plan})
