"""The systolic array: an R x C grid of output-stationary processing elements with its input skew."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .pe import ProcessingElement

__all__ = ["SystolicArray"]


class SystolicArray(wiring.Component):
    """An output-stationary ``rows`` x ``cols`` int8 matrix-multiply array.

    ``a[r]`` enters PE(r, 0) and moves east one PE per step; ``b[c]`` enters PE(0, c) and moves south.
    Row ``r``'s input first passes through ``r`` skew registers and column ``c``'s through ``c``, so the
    caller presents *unskewed* slices: at step ``t`` it presents ``A[r][t]`` on every ``a[r]`` and
    ``B[t][c]`` on every ``b[c]`` (zeros for ``t >= K``). PE(r, c) then multiplies ``A[r][k] * B[k][c]`` at
    step ``k + r + c`` and accumulates the product at step ``k + r + c + 1`` (the product is registered,
    see :class:`ProcessingElement`). After the ``K + M + N - 1`` steps ``0 .. K+M+N-2`` every PE(r < M,
    c < N) holds ``C[r][c] = sum_k A[r][k] * B[k][c]`` (wrapping int32).

    Skew registers and PEs advance only on ``step`` and are zeroed by ``clear`` (which has priority).

    Parameters
    ----------
    rows : int
        Number of rows R (positive).
    cols : int
        Number of columns C (positive).

    Members
    -------
    a : In(ArrayLayout(signed(8), rows))
        Row operands of the current step, unskewed.
    b : In(ArrayLayout(signed(8), cols))
        Column operands of the current step, unskewed.
    step : In(1)
        Advance the whole array (skew registers and PEs) by one step.
    clear : In(1)
        Zero every register of the array.
    acc : Out(ArrayLayout(signed(32), rows * cols))
        The accumulators, row-major: PE(r, c) is ``acc[r * cols + c]``.

    Raises
    ------
    TypeError
        If ``rows`` or ``cols`` is not a positive integer.
    """

    def __init__(self, *, rows, cols):
        if isinstance(rows, bool) or not isinstance(rows, int) or rows <= 0:
            raise TypeError(f"Row count must be a positive integer, not {rows!r}")
        if isinstance(cols, bool) or not isinstance(cols, int) or cols <= 0:
            raise TypeError(f"Column count must be a positive integer, not {cols!r}")
        self._rows = rows
        self._cols = cols
        super().__init__({
            "a": In(data.ArrayLayout(signed(8), rows)),
            "b": In(data.ArrayLayout(signed(8), cols)),
            "step": In(1),
            "clear": In(1),
            "acc": Out(data.ArrayLayout(signed(32), rows * cols)),
            "acc00_next": Out(signed(32)),
        })

    @property
    def rows(self):
        return self._rows

    @property
    def cols(self):
        return self._cols

    def _skew(self, m, value, depth, name):
        """``value`` delayed by ``depth`` steps through a chain of step-enabled, clearable registers."""
        for d in range(depth):
            reg = Signal(signed(8), name=f"{name}_{d}")
            with m.If(self.clear):
                m.d.sync += reg.eq(0)
            with m.Elif(self.step):
                m.d.sync += reg.eq(value)
            value = reg
        return value

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols

        pe = [[None] * cols for _ in range(rows)]
        for r in range(rows):
            for c in range(cols):
                # East of the first column a cell multiplies its own copy of the west cell's operand
                # register (ProcessingElement's a_mul_port says why); the first column's a_i is a skew
                # register or the input itself.
                pe[r][c] = cell = ProcessingElement(a_mul_port=c > 0)
                m.submodules[f"pe_{r}_{c}"] = cell
                m.d.comb += [
                    cell.step.eq(self.step),
                    cell.clear.eq(self.clear),
                    self.acc[r * cols + c].eq(cell.acc),
                ]

        m.d.comb += self.acc00_next.eq(pe[0][0].acc_next)
        # Operand k of row r must meet operand k of column c in PE(r, c). Both travel one PE per step, so
        # a[r] is held back r steps and b[c] c steps: then both arrive at step k + r + c. Doing the skew
        # here lets the matrix unit feed whole unskewed slices from a plain one-word-per-cycle read.
        for r in range(rows):
            west = self._skew(m, self.a[r], r, f"skew_a{r}")
            for c in range(cols):
                m.d.comb += pe[r][c].a_i.eq(west)
                if c > 0:
                    m.d.comb += pe[r][c].a_mul_i.eq(pe[r][c - 1].a_mul_o)
                west = pe[r][c].a_o
        for c in range(cols):
            north = self._skew(m, self.b[c], c, f"skew_b{c}")
            for r in range(rows):
                m.d.comb += pe[r][c].b_i.eq(north)
                north = pe[r][c].b_o
        return m
