"""The matrix unit's write-back: the M x N results of an MM, in row-major order, one per cycle."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .feeder import MatrixFields
from .ports import SpWriteSignature, check_config, sp_addr_width

__all__ = ["ResultWriter"]


class ResultWriter(wiring.Component):
    """Writes result (i, j) of an ``M`` x ``N`` product, the accumulator of PE(i, j), to ``dst + i*ldc + j``.

    ``start`` puts the walk at result (0, 0) of the destination ``dst``. In every cycle with ``en`` high the
    current result is written and the walk moves to the next one in row-major order. Row-major order is what
    lets the unit write while the array still finishes: PE(i, j) completes ``i + j`` steps after PE(0, 0), and
    its result is written ``i*N + j >= i + j`` cycles after PE(0, 0)'s. The address and the accumulator index
    ``i*cols + j`` are stepped with adders only: no multiplier sits between the counters and the write port or
    the accumulator multiplexer.

    Members
    -------
    start : In(1)
        Restart the walk at result (0, 0).
    dst : In(addr_width)
        The destination, valid with ``start``.
    fields : In(MatrixFields)
        ``M - 1``, ``N - 1`` and ``ldc``, valid from the cycle after ``start``.
    en : In(1)
        Write the current result this cycle and move to the next.
    acc : In(ArrayLayout(signed(32), rows * cols))
        The results: PE(r, c)'s accumulator is ``acc[r * cols + c]``.
    last : Out(1)
        The current result is the last one, (M-1, N-1).
    sp_wr : Out(SpWriteSignature)
        Scratchpad write port.
    """

    def __init__(self, config):
        self._config = check_config(config)
        aw = sp_addr_width(config)
        super().__init__({
            "start": In(1), "dst": In(aw), "fields": In(MatrixFields), "en": In(1),
            "acc": In(data.ArrayLayout(signed(32), config.rows * config.cols)),
            "last": Out(1), "sp_wr": Out(SpWriteSignature(aw)),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._config.rows, self._config.cols
        aw = sp_addr_width(self._config)
        fields = self.fields

        row = Signal(aw)                                # dst + i*ldc
        addr = Signal(aw)                               # dst + i*ldc + j
        i = Signal(8)
        j = Signal(8)
        sel_row = Signal(range(rows * cols + cols))     # i*cols
        sel = Signal(range(rows * cols + cols))         # i*cols + j: the PE written

        last_in_row = j == fields.n_last
        with m.If(self.start):
            m.d.sync += [row.eq(self.dst), addr.eq(self.dst), i.eq(0), j.eq(0), sel_row.eq(0), sel.eq(0)]
        with m.Elif(self.en & last_in_row):
            m.d.sync += [i.eq(i + 1), j.eq(0),
                         row.eq(row + fields.ldc),
                         addr.eq(row + fields.ldc),
                         sel_row.eq(sel_row + cols),
                         sel.eq(sel_row + cols)]
        with m.Elif(self.en):
            m.d.sync += [j.eq(j + 1), addr.eq(addr + 1), sel.eq(sel + 1)]

        m.d.comb += [
            self.sp_wr.en.eq(self.en),
            self.sp_wr.addr.eq(addr),
            self.sp_wr.data.eq(self.acc[0] if rows * cols == 1 else self.acc[sel]),
            self.last.eq(last_in_row & (i == fields.m_last)),
        ]
        return m
