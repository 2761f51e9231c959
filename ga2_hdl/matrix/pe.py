"""One cell of the systolic array: an output-stationary int8 x int8 -> int32 multiply-accumulate."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ProcessingElement"]


class ProcessingElement(wiring.Component):
    """An output-stationary multiply-accumulate cell with a registered product.

    On a cycle with ``step`` high the cell passes its operands on (``a_o <= a_i``, ``b_o <= b_i``),
    registers their product (``prod <= a_i * b_i``) and adds the product registered by the *previous*
    step to the accumulator (``acc <= acc + prod``, wrapping int32). A product therefore reaches ``acc``
    one step after its operands were presented. ``clear`` sets every register (``a_o``, ``b_o``, the
    product and ``acc``) to zero and takes priority over ``step``; with neither high nothing changes.

    Members
    -------
    a_i : In(signed(8))
        Operand from the west.
    b_i : In(signed(8))
        Operand from the north.
    step : In(1)
        Advance the cell by one step.
    clear : In(1)
        Zero the cell (priority over ``step``).
    a_o : Out(signed(8))
        ``a_i`` of the last step, to the cell to the east.
    b_o : Out(signed(8))
        ``b_i`` of the last step, to the cell to the south.
    acc : Out(signed(32))
        The accumulated sum of products.
    a_mul_o : Out(signed(8))
        ``a_i`` of the last step, like ``a_o`` but not zeroed by ``clear``: the east cell's copy of its
        multiplier operand (see ``a_mul_i``).
    a_mul_i : In(signed(8))
        Only with ``a_mul_port``: the multiplier's ``a`` operand. It must equal ``a_i`` on every step where
        ``b_i`` is not 0 (where ``b_i`` is 0 the product is 0 whatever it holds).

    Parameters
    ----------
    a_mul_port : bool
        Multiply ``a_mul_i`` instead of ``a_i``. The array gives every cell east of the first column its
        own register of the west cell's operand (``a_mul_o``), so that the flip-flop driving the
        multiplier (a MULT18X18D on ECP5) is placed for it alone, not also for the east cell's ``a_o``: the
        in-order chip's worst path was a cell's ``a_o`` -> the east cell's multiplier -> its product
        (102.39 MHz median with the copies, 99.02 without; copying ``b`` too measured worse, docs/SYNTH.md).
        The copy is not cleared, so Yosys cannot merge it with ``a_o``; a cleared ``a_o`` only ever meets
        a cleared ``b`` (the array clears every register at once), so a stale copy multiplies 0.
    """

    def __init__(self, *, a_mul_port=False):
        self._a_mul_port = bool(a_mul_port)
        super().__init__({
            "a_i": In(signed(8)),
            "b_i": In(signed(8)),
            "step": In(1),
            "clear": In(1),
            "a_o": Out(signed(8)),
            "b_o": Out(signed(8)),
            "acc": Out(signed(32)),
            "acc_next": Out(signed(32)),
            "a_mul_o": Out(signed(8)),
            **({"a_mul_i": In(signed(8))} if self._a_mul_port else {}),
        })

    def elaborate(self, platform):
        m = Module()

        # The product has its own register so that the multiplier (one MULT18X18D on ECP5) and the 32-bit
        # accumulate carry chain fall into different cycles: the STYLE.md measurements (part C4) gave 90 MHz
        # with both in one path and 128-139 MHz with the product registered. The price is one step of
        # latency, which the array's schedule (and the matrix unit's flush) accounts for.
        prod = Signal(signed(16))

        a_mul = self.a_mul_i if self._a_mul_port else self.a_i

        m.d.comb += self.acc_next.eq(self.acc + prod)
        with m.If(self.step):
            m.d.sync += self.a_mul_o.eq(self.a_i)
        with m.If(self.clear):
            m.d.sync += [self.a_o.eq(0), self.b_o.eq(0), prod.eq(0), self.acc.eq(0)]
        with m.Elif(self.step):
            m.d.sync += [
                self.a_o.eq(self.a_i),
                self.b_o.eq(self.b_i),
                prod.eq(a_mul * self.b_i),
                # signed(33) into signed(32): wraps, which is the int32 semantics we want.
                self.acc.eq(self.acc + prod),
            ]
        return m
