"""The requantiser's arithmetic: ``sat8(round(word * m / 2**s))`` of one int32 word per cycle, pipelined
over the ``RQ_DEPTH`` cycles from the word's scratchpad read to its result."""

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.timing import RQ_DEPTH

from ..ports import WORD
from ..valid_chain import ValidChain

__all__ = ["RequantPipeline", "PRODUCT_WIDTH", "SHIFT_WIDTH", "rounding_term", "round_shift", "saturate",
           "half_shift", "round_half_saturate", "round_half_flags", "saturation_thresholds"]

# The product of an int32 and the signed 16-bit multiplier m.
PRODUCT_WIDTH = 48
# Largest shift the sequencer lets through (docs/ISA.md, SHAPE); s is carried in 6 bits.
SHIFT_WIDTH = 6


def rounding_term(s, width):
    """``2**(s-1)`` as an unsigned ``width``-bit value, 0 when ``s`` is 0 (a variable-amount shift)."""
    # (1 << s) >> 1 gives the half-LSB for s >= 1 and drops to 0 for s = 0 without a separate Mux.
    return (Const(1, unsigned(width + 1)) << s)[1:width + 1]


def round_shift(x, s):
    """``(x + 2**(s-1)) >> s`` on a signed ``x``, arithmetic, ties towards +infinity.

    The sum is one bit wider than ``x`` so the rounding add can never wrap (the S8/B11 pitfall of STYLE.md:
    a wrapping add is wrong only next to the top of the range, which random tests almost never reach)."""
    total = x + rounding_term(s, len(x) - 1)
    return total >> s


def half_shift(x, s):
    """``floor(x / 2**(s-1))``, i.e. ``(2x) >> s``: x shifted by one bit less than ``s``, keeping the bit
    that decides the rounding. For ``s = 0`` it is ``2x``."""
    return (x << 1) >> s


def saturation_thresholds(s):
    """``(hi, lo)``: ``half_shift(x, s) >= 255`` exactly when ``x >= hi``, and ``half_shift(x, s) <= -258``
    exactly when ``x < lo``, for every integer ``x``: ``hi = ceil(255 * 2**(s-1))`` and
    ``lo = -floor(257 * 2**(s-1))`` (``s = 0``: 128 and -128). They depend on ``s`` alone, so the pipeline
    decides the clamp from the product a stage before the rounding (``sim/formal.py`` proves the two ways equal)."""
    hi = ((Const(255, unsigned(8)) << s) + 1) >> 1
    lo = -((Const(257, unsigned(9)) << s) >> 1)
    return hi, lo


def round_half_flags(t, over, under, width=8):
    """``sat((t + 1) >> 1)`` to ``signed(width)`` given the clamp decided beforehand: ``over`` when the result
    exceeds ``2**(width-1) - 1`` (``t >= 2**width - 1``), ``under`` when it falls below ``-2**(width-1)``
    (``t <= -2**width - 2``). The rounding add is ``width + 2`` bits wide, not the product's width."""
    low = (t[:width + 2].as_signed() + 1) >> 1
    top = (1 << (width - 1)) - 1
    return Mux(over, top, Mux(under, -top - 1, low))[:width].as_signed()


def round_half_saturate(t, width=8):
    """``sat((t + 1) >> 1)`` to ``signed(width)``, which equals ``sat((x + 2**(s-1)) >> s)`` for
    ``t = half_shift(x, s)``: the clamp decided on ``t`` itself (for 8 bits the result exceeds 127 exactly when
    ``t >= 255`` and falls below -128 exactly when ``t <= -258``)."""
    return round_half_flags(t, t >= (1 << width) - 1, t <= -(1 << width) - 2, width)


def saturate(x, width):
    """Clamp a signed ``x`` to the range of ``signed(width)`` and return it as ``signed(width)``."""
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return Mux(x > hi, hi, Mux(x < lo, lo, x))[:width].as_signed()


class RequantPipeline(wiring.Component):
    """``o = sat8((word * mult + 2**(shift-1)) >> shift)``, one word per cycle, ``RQ_DEPTH`` stages.

    With a word's scratchpad read requested in cycle ``t`` (``read`` high) and a read latency of 1 (the word on
    ``word`` in cycle ``t+1``; the banked scratchpad's ``read_latency`` of 4 adds its request register in front
    of the read and its data and select registers after it), the registered stages are

    1. the read itself (its data register is the block RAM's);
    2. the word, registered before it meets the multiplier, since the block RAM's clock-to-output plus a
       32 x 16 multiply was the chip's critical path on ECP5 (60 MHz), and the banked scratchpad's 16-way
       bank select plus the multiply the decoupled chip's (68 MHz);
    3. two 16 x 16 partial products: each fits one 18 x 18 DSP block, and the 32 x 16 product in one stage
       (two DSPs and their sum) was the critical path at 98 MHz;
    4. the 48-bit product;
    5. the product shifted right by ``shift - 1`` (``half_shift``; the rounding add waits for the output,
       where it is short);

    and ``o`` (rounded and saturated, ``round_half_saturate``) is valid in cycle ``t + RQ_DEPTH``.
    ``mult`` and ``shift`` must hold while words are in flight; with ``carry_fields`` they are taken with each
    word instead, in the cycle ``word`` holds it, and travel beside it (two requantisations with fields of their
    own may then be in flight at once: ``Config.rq_overlap``).

    Members
    -------
    read : In(1)
        A word's scratchpad read is requested in this cycle.
    word : In(32)
        The scratchpad's read data: the word requested ``read_latency`` cycles before.
    mult : In(signed(16))
        The multiplier ``m``.
    shift : In(SHIFT_WIDTH)
        The shift ``s``, 0 .. 47.
    o : Out(stream.Signature(signed(8), always_ready=True))
        The int8 result, ``latency`` cycles after its word's read request.
    """

    read: In(1)
    word: In(WORD)
    mult: In(signed(16))
    shift: In(SHIFT_WIDTH)
    o: Out(stream.Signature(signed(8), always_ready=True))

    def __init__(self, *, read_latency=1, carry_fields=False):
        if read_latency < 1:
            raise ValueError(f"read_latency must be at least 1, not {read_latency}")
        self.read_latency = read_latency
        self.carry_fields = carry_fields
        super().__init__()

    @property
    def latency(self):
        """Cycles from a word's read request to its result: ``RQ_DEPTH`` with a 1-cycle read from the block
        RAM; each further cycle of read latency adds one."""
        return RQ_DEPTH + self.read_latency - 1

    def elaborate(self, platform):
        m = Module()
        word = Signal(signed(WORD), name="word")
        low = Signal(signed(33), name="partial_low")      # unsigned low half times m
        high = Signal(signed(32), name="partial_high")    # signed high half times m
        product = Signal(signed(PRODUCT_WIDTH), name="product")
        shifted = Signal(signed(PRODUCT_WIDTH + 1), name="shifted")

        # The clamp thresholds of the current shift, registered: `shift` holds for the whole instruction and is
        # set a cycle before the first read, long before the first product reaches the shift stage.
        # So is a copy of the shift itself, which the placer can put beside the shifter: its six bits steer
        # every bit of the 49-bit shift, and from the unit's field register they crossed the die (rq.shift ->
        # rq.pipeline.shifted, 10.34 ns of which 8.16 routing, on a 25F).
        over, under = Signal(name="over"), Signal(name="under")
        shift = Signal.like(self.shift, name="shift_here")
        if self.carry_fields:
            # Each word's fields, taken with it and registered beside it up to the stage that uses them: the
            # multiplier beside the word, the shift and its clamp thresholds beside the product.
            mult, shift_w, shift_p = Signal.like(self.mult, name="mult_w"), Signal.like(self.shift), Signal.like(self.shift)
            hi, lo = saturation_thresholds(shift_p)
            over_at, under_at = Signal.like(hi, name="over_at"), Signal.like(lo, name="under_at")
            fields = [mult.eq(self.mult), shift_w.eq(self.shift)]
            carried = [shift_p.eq(shift_w)]
            at_product = [over_at.eq(hi), under_at.eq(lo), shift.eq(shift_p)]
        else:
            hi, lo = saturation_thresholds(self.shift)
            over_at, under_at = Signal.like(hi, name="over_at"), Signal.like(lo, name="under_at")
            m.d.sync += [over_at.eq(hi), under_at.eq(lo), shift.eq(self.shift)]
            mult, fields, carried, at_product = self.mult, [], [], []

        chain = ValidChain(m, self.read)
        for n in range(self.read_latency - 1):
            chain.stage(f"request{n}")      # the banked scratchpad's request, data and select registers
        chain.stage("data")
        chain.stage("word", word.eq(self.word.as_signed()), *fields)
        chain.stage("partial", low.eq(word[:16] * mult), high.eq(word[16:].as_signed() * mult), *carried)
        chain.stage("product", product.eq((high << 16) + low), *at_product)
        # The shift and, beside it, the clamp decided on the product: the last stage only rounds 10 bits and
        # selects (the round-and-clamp compare into the write register was the in-order chip's critical path).
        chain.stage("shifted", shifted.eq(half_shift(product, shift)),
                    over.eq(product >= over_at), under.eq(product < under_at))
        chain.check(self.latency, "The requantiser pipeline")

        m.d.comb += [
            self.o.valid.eq(chain.valid),
            self.o.payload.eq(round_half_flags(shifted, over, under)),
        ]
        return m
