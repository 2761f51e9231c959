"""The decoupled chip's systolic array: R x C cells of ``TiledProcessingElement`` that take one tile after
another with no clear between them."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .tiled_pe import TiledProcessingElement

__all__ = ["TiledSystolicArray"]


class TiledSystolicArray(wiring.Component):
    """An output-stationary ``rows`` x ``cols`` int8 matrix-multiply array that runs every cycle.

    In a cycle with ``valid`` the caller presents one unskewed k-slice of a tile: ``A[r][k]`` on every ``a[r]``
    and ``Bop(k, c)`` on every ``b[c]``, with ``last`` on its last slice ``K - 1``. In other cycles the array runs on with a bubble (``a`` taken
    as zero, no marks), so slices need not come in consecutive cycles, and the next tile's slices may follow
    the last one's at once. As in :class:`~ga2_hdl.matrix.systolic.SystolicArray`, row ``r``'s operands pass ``r``
    skew registers and column ``c``'s ``c``, so slice ``k`` presented in cycle ``t`` meets in PE(r, c) in cycle
    ``t + r + c``; the mark travels with row ``r``'s operands. PE(r, c)'s result (wrapping int32) is in
    ``out[r * cols + c]`` from cycle ``t_last + r + c + 2`` (``t_last``: the cycle its tile's last slice was
    presented) until the same cycle of the next tile.

    With ``per_cell_b`` (a ``Config.row_b`` chip, whose MM may give each row a B of its own) the caller presents
    the operand of every cell, ``b[r * cols + c]`` for PE(r, c), which passes ``r + c`` skew registers straight
    to its cell instead of flowing down the column: it meets row ``r``'s operand in the same cycle as a
    column operand would.

    Members
    -------
    a : In(ArrayLayout(signed(8), rows))
    b : In(ArrayLayout(signed(8), cols)), or In(ArrayLayout(signed(8), rows * cols)) with ``per_cell_b``
    valid, last : In(1)
    out : Out(ArrayLayout(signed(32), rows * cols))
    """

    def __init__(self, *, rows, cols, per_cell_b=False):
        for name, n in (("Row", rows), ("Column", cols)):
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                raise TypeError(f"{name} count must be a positive integer, not {n!r}")
        self._rows, self._cols, self._per_cell_b = rows, cols, per_cell_b
        super().__init__({
            "a": In(data.ArrayLayout(signed(8), rows)),
            "b": In(data.ArrayLayout(signed(8), rows * cols if per_cell_b else cols)),
            "valid": In(1), "last": In(1),
            "out": Out(data.ArrayLayout(signed(32), rows * cols)),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols
        pe = [[TiledProcessingElement() for _ in range(cols)] for _ in range(rows)]
        for r in range(rows):
            for c in range(cols):
                m.submodules[f"pe_{r}_{c}"] = pe[r][c]
                m.d.comb += self.out[r * cols + c].eq(pe[r][c].out)

        def skew(value, depth, name):
            for d in range(depth):
                reg = Signal.like(value, name=f"{name}_{d}")
                m.d.sync += reg.eq(value)
                value = reg
            return value

        # A bubble's row operands are zero, so its products are zero whatever its column operands are: both
        # reach a cell in the same cycle. The mark is the feeder's, high only with `valid`; row r takes it
        # r cycles late, from one chain down the west edge.
        last = self.last
        for r in range(rows):
            west = skew(Mux(self.valid, self.a[r], 0), r, f"skew_a{r}")
            m.d.comb += pe[r][0].last_i.eq(last)
            for c in range(cols):
                m.d.comb += pe[r][c].a_i.eq(west)
                if c + 1 < cols:
                    m.d.comb += pe[r][c + 1].last_i.eq(pe[r][c].last_o)
                west = pe[r][c].a_o
            if r + 1 < rows:
                last = skew(last, 1, f"last_r{r + 1}")
        for c in range(cols):
            north = skew(self.b[c], c, f"skew_b{c}")
            for r in range(rows):
                m.d.comb += pe[r][c].b_i.eq(north)
                north = (skew(self.b[(r + 1) * cols + c], r + 1 + c, f"skew_b{r + 1}_{c}")
                         if self._per_cell_b and r + 1 < rows else pe[r][c].b_o)
        return m
