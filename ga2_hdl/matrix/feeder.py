"""What the matrix unit shares with its two operand feeders (``staged_feeder.py``, ``stream_feeder.py``): the
instruction fields it latches at ``start`` and the signature through which it drives a feeder."""

from amaranth.hdl import Mux, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..ports import InstrLayout

__all__ = ["MatrixFields", "latch_fields", "b_strides", "FeederSignature"]

# The fields of ``MM dst A B M K N tb lda ldb ldc`` that outlive the start cycle, as the feeders and the result
# writer use them. The base addresses are not here: each feeder loads its address registers from the
# instruction itself in the start cycle, so that its first read (cycle 1) already comes from a register.
MatrixFields = data.StructLayout({
    "m_last": unsigned(8),      # M - 1
    "n_last": unsigned(8),      # N - 1
    "k_last": unsigned(16),     # K - 1
    "ldc": unsigned(12),
    "b_kstride": unsigned(12),  # address step from Bop(k, j) to Bop(k+1, j): ldb, or 1 when tb
})


def b_strides(instr):
    """The address steps through ``Bop``: ``(to Bop(k, j+1), to Bop(k+1, j))`` from ``Bop(k, j)``, that is
    ``(1, ldb)``, or ``(ldb, 1)`` when B is stored transposed (``tb``)."""
    return Mux(instr.tb, instr.ldb, 1), Mux(instr.tb, 1, instr.ldb)


def latch_fields(fields, instr):
    """The statements that load a ``MatrixFields`` view from the instruction of the start cycle."""
    return [
        fields.m_last.eq(instr.M - 1),
        fields.n_last.eq(instr.N - 1),
        fields.k_last.eq(instr.K - 1),
        fields.ldc.eq(instr.ldc),
        fields.b_kstride.eq(b_strides(instr)[1]),
    ]


class FeederSignature(wiring.Signature):
    """The matrix unit's port to its operand feeder, seen from the unit.

    A feeder reads the operands of one MM through read ports of its own and presents them to the systolic array
    as unskewed k-slices (rows ``>= M`` and columns ``>= N`` zero), stepping the array on each, then on zero
    slices that carry the last products through it. From the cycle after ``done`` on the results are written,
    one per cycle in row-major order, and the unit keeps the array stepping in every write cycle: so a feeder
    may leave its last flush steps to the write phase, as long as each PE is complete by the cycle that writes
    it.

    Members
    -------
    start : Out(1)
        One-cycle pulse: the unit starts an MM.
    instr : Out(InstrLayout)
        The instruction, valid with ``start`` only.
    fields : Out(MatrixFields)
        The latched fields, valid from the cycle after ``start`` until the next ``start``.
    clear : Out(1)
        Cycle 1: the array is being cleared (no step); the feeder zeroes its operand registers.
    a : In(ArrayLayout(signed(8), rows))
        Row operands of the array's current step.
    b : In(ArrayLayout(signed(8), cols)), or In(ArrayLayout(signed(8), rows * cols)) with ``per_cell_b``
        Column operands of the array's current step; with ``per_cell_b`` (a ``row_b`` chip) the operand of
        each cell, row-major (``TiledSystolicArray``).
    step : In(1)
        Step the array (in order); decoupled, the array runs every cycle and ``step`` says that ``a`` and ``b``
        are a slice (:class:`~ga2_hdl.matrix.tiled_array.TiledSystolicArray`'s ``valid``).
    last : In(1)
        Decoupled: with ``step``, the slice is the tile's last.
    done : In(1)
        The feeder's last cycle.
    pe00_late : In(1)
        PE(0,0) accumulates its last product in the first write cycle, which writes it: the first result is
        then PE(0,0)'s ``acc + prod`` (the staged schedule with ``M = N = 1``).
    """

    def __init__(self, rows, cols, per_cell_b=False):
        self._rows, self._cols, self._per_cell_b = rows, cols, per_cell_b
        super().__init__({
            "start": Out(1), "instr": Out(InstrLayout), "fields": Out(MatrixFields), "clear": Out(1),
            "a": In(data.ArrayLayout(signed(8), rows)),
            "b": In(data.ArrayLayout(signed(8), rows * cols if per_cell_b else cols)),
            "step": In(1), "last": In(1), "done": In(1), "pe00_late": In(1),
        })

    def __eq__(self, other):
        return type(other) is FeederSignature and \
            (other._rows, other._cols, other._per_cell_b) == (self._rows, self._cols, self._per_cell_b)

    def __repr__(self):
        return f"FeederSignature({self._rows}, {self._cols}{', per_cell_b=True' if self._per_cell_b else ''})"
