"""One cell of the decoupled chip's systolic array: an output-stationary int8 x int8 -> int32 multiply-accumulate
that tells one tile from the next by marks travelling with its operands, and keeps a finished tile's sum."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["TiledProcessingElement"]


class TiledProcessingElement(wiring.Component):
    """A multiply-accumulate cell that runs every cycle, with a registered product and a result register.

    In every cycle the cell passes its operands and mark on (``a_o <= a_i``, ``b_o <= b_i``, ``last_o <=
    last_i``), registers the product ``a_i * b_i`` with the mark that came with it, and adds the product
    registered in the previous cycle to the accumulator. When that product was a tile's last (``last``), the
    sum goes to ``out`` instead, where it stays until the next tile's last product, and the accumulator
    starts again from zero (the flip-flops' synchronous reset, so no gate sits in front of the adder). So
    tiles follow each other through the cell with no clear and no gap, and a finished tile's result stays
    readable while the next one accumulates. A cycle with no operands (a bubble) presents ``a_i = 0`` and no
    mark: its product adds nothing.

    Members
    -------
    a_i, b_i : In(signed(8))
        Operands from the west and from the north.
    last_i : In(1)
        Mark of ``a_i``: it is the last operand of its tile in this cell.
    a_o, b_o : Out(signed(8))
        ``a_i`` and ``b_i`` of the previous cycle, to the cells to the east and to the south.
    last_o : Out(1)
        The mark of the previous cycle, to the cell to the east (it travels with ``a``).
    out : Out(signed(32))
        The sum of the last finished tile (wrapping int32).
    """

    a_i: In(signed(8))
    b_i: In(signed(8))
    last_i: In(1)
    a_o: Out(signed(8))
    b_o: Out(signed(8))
    last_o: Out(1)
    out: Out(signed(32))

    def elaborate(self, platform):
        m = Module()
        # The product is registered, as in the in-order cell (ProcessingElement), so that the multiplier and
        # the accumulator's carry chain are in different cycles; its mark is registered beside it.
        prod, prod_last = Signal(signed(16)), Signal()
        acc = Signal(signed(32))
        total = Signal(signed(32))      # signed(33) into signed(32): wraps, the int32 semantics we want
        m.d.comb += total.eq(acc + prod)
        m.d.sync += [self.a_o.eq(self.a_i), self.b_o.eq(self.b_i), self.last_o.eq(self.last_i),
                     prod.eq(self.a_i * self.b_i), prod_last.eq(self.last_i)]
        with m.If(prod_last):
            m.d.sync += [self.out.eq(total), acc.eq(0)]
        with m.Else():
            m.d.sync += acc.eq(total)
        return m
