"""The requantiser: executes ``RQ dst src len m s`` (docs/ISA.md), int32 to int8, one element per cycle."""

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned

from .ports import Unit

__all__ = ["Requantiser", "rounding_term", "round_shift", "saturate", "half_shift", "round_half_saturate"]

# The product of an int32 and the signed 16-bit multiplier m.
PRODUCT_WIDTH = 48
PIPELINE_DEPTH = 5      # cycles from an element's read to its write
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


def round_half_saturate(t):
    """``sat8((t + 1) >> 1)``, which equals ``sat8((x + 2**(s-1)) >> s)`` for ``t = half_shift(x, s)``.

    The clamp is decided on ``t`` itself (the result exceeds 127 exactly when ``t >= 255`` and falls below
    -128 exactly when ``t <= -258``), so the rounding add is 10 bits wide, not 49: the requantiser splits
    ``round_shift`` into a barrel shift and this small stage to keep each pipeline stage short."""
    low = (t[:10].as_signed() + 1) >> 1
    return Mux(t >= 255, 127, Mux(t <= -258, -128, low))[:8].as_signed()


def saturate(x, width):
    """Clamp a signed ``x`` to the range of ``signed(width)`` and return it as ``signed(width)``."""
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return Mux(x > hi, hi, Mux(x < lo, lo, x))[:width].as_signed()


class Requantiser(Unit):
    """Executes RQ: ``sp[dst+i] = requant(s32(sp[src+i]), m, s)``, written sign-extended to 32 bits.

    A six-step pipeline, one element per cycle. With the start pulse in cycle 0, element ``i`` is

    * read (``sp_rd`` at ``src+i``) in cycle ``1+i``,
    * registered as it comes out of the scratchpad in cycle ``2+i``,
    * multiplied as two 16 x 16 partial products (registered) in cycle ``3+i``,
    * summed into the 48-bit product (registered) in cycle ``4+i``,
    * shifted right by ``s - 1`` (registered) in cycle ``5+i``,
    * rounded, saturated to -128..127 and written (``sp_wr`` at ``dst+i``) in cycle ``6+i``.

    ``busy`` is high in cycles ``1 .. len+5`` (X = ``len + 5``) and ``done`` in cycle ``len+5`` only. A read in
    the cycle of a write returns the old word (the scratchpad is not transparent) and the scratchpad registers
    each write request for a cycle, so with ``dst`` more than 6 words ahead of ``src`` a later element reads a value this instruction already wrote, exactly as the
    reference machine models it.

    The instruction fields are latched at ``start``: ``dst``, ``src``, ``len``, ``m = instr.k`` (signed 16-bit)
    and ``s = instr.M[0:6]`` (0 .. 47; the sequencer rejects larger shifts).

    Members
    -------
    start : In(1)
        One-cycle pulse; ``instr`` is valid in the same cycle.
    instr : In(InstrLayout)
        The decoded RQ instruction.
    busy : Out(1)
        High for the ``len + PIPELINE_DEPTH`` (``len + 5``) cycles after ``start``.
    done : Out(1)
        High in the last busy cycle only.
    sp_rd : Out(SpReadSignature)
        Scratchpad read port (1-cycle latency).
    sp_wr : Out(SpWriteSignature)
        Scratchpad write port.
    """


    def elaborate(self, platform):
        m = Module()
        instr = self.ctl.instr

        # Fields latched at start: the sequencer only holds instr valid in the start cycle.
        dst = Signal.like(instr.dst, name="dst")
        src = Signal.like(instr.src, name="src")
        length = Signal.like(instr.len, name="length")
        mult = Signal(signed(16), name="mult")
        shift = Signal(SHIFT_WIDTH, name="shift")

        # The cycle number relative to the start pulse: busy ends at len + PIPELINE_DEPTH whatever the data path does.
        step = Signal(len(instr.len) + 1, name="step")
        last_step = Signal(len(instr.len) + 1, name="last_step")
        rd_index = Signal.like(instr.len, name="rd_index")
        wr_index = Signal.like(instr.len, name="wr_index")

        # One valid bit per pipeline register.
        data_valid = Signal(name="data_valid")
        product = Signal(signed(PRODUCT_WIDTH), name="product")
        product_valid = Signal(name="product_valid")
        shifted = Signal(signed(PRODUCT_WIDTH + 1), name="shifted")     # half_shift(product, s)
        shifted_valid = Signal(name="shifted_valid")

        busy = Signal(name="busy_r")
        m.d.comb += [
            self.ctl.busy.eq(busy),
            self.ctl.done.eq(busy & (step == last_step)),
        ]

        with m.If(self.ctl.start):
            m.d.sync += [
                dst.eq(instr.dst),
                src.eq(instr.src),
                length.eq(instr.len),
                mult.eq(instr.m),
                shift.eq(instr.s),
                last_step.eq(instr.len + PIPELINE_DEPTH),
                step.eq(1),
                rd_index.eq(0),
                wr_index.eq(0),
                busy.eq(1),
            ]
        with m.Elif(busy):
            m.d.sync += step.eq(step + 1)
            with m.If(self.ctl.done):
                m.d.sync += busy.eq(0)

        # Cycle 1+i: issue the read of element i.
        reading = busy & (rd_index < length)
        m.d.comb += [
            self.sp_rd.en.eq(reading),
            self.sp_rd.addr.eq(src + rd_index),
        ]
        with m.If(reading):
            m.d.sync += rd_index.eq(rd_index + 1)
        m.d.sync += data_valid.eq(reading)

        # Cycle 2+i: the word is on sp_rd.data; register it before it meets the multiplier, since the
        # block RAM's clock-to-output plus a 32x16 multiply was the chip's critical path on ECP5 (60 MHz).
        word = Signal(signed(32), name="word")
        word_valid = Signal(name="word_valid")
        m.d.sync += [word.eq(self.sp_rd.data.as_signed()), word_valid.eq(data_valid)]

        # Cycle 3+i: two 16 x 16 partial products, registered: each fits one 18 x 18 DSP block, and the 32 x 16
        # product in one stage (two DSPs and their sum) was the critical path at 98 MHz.
        low = Signal(signed(33), name="partial_low")      # unsigned low half times m
        high = Signal(signed(32), name="partial_high")    # signed high half times m
        partial_valid = Signal(name="partial_valid")
        m.d.sync += [
            low.eq(word[:16] * mult),
            high.eq(word[16:].as_signed() * mult),
            partial_valid.eq(word_valid),
        ]

        # Cycle 4+i: the full-width product.
        m.d.sync += [
            product.eq((high << 16) + low),
            product_valid.eq(partial_valid),
        ]

        # Cycle 5+i: shift by s - 1, registered (the rounding add waits for the next stage, where it is short).
        m.d.sync += [
            shifted.eq(half_shift(product, shift)),
            shifted_valid.eq(product_valid),
        ]

        # Cycle 6+i: round, saturate and write; the int8 result is sign-extended to the word.
        result = Signal(signed(8), name="result")
        m.d.comb += [
            result.eq(round_half_saturate(shifted)),
            self.sp_wr.en.eq(shifted_valid),
            self.sp_wr.addr.eq(dst + wr_index),
            self.sp_wr.data.eq(result.as_signed()),
        ]
        with m.If(shifted_valid):
            m.d.sync += wr_index.eq(wr_index + 1)

        return m
