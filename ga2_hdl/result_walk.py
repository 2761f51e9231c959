"""The write-back walk shared by both matrix units: the M x N results in row-major order, one per cycle."""

from amaranth.hdl import Signal

__all__ = ["ResultWalk"]


class ResultWalk:
    """Addresses ``dst + i*ldc + j`` and accumulator index ``i*cols + j`` of result (i, j), stepped with
    adders only (no multiplier between the counters and the write port or the accumulator multiplexer).

    Not a component: its registers live in the matrix unit that owns it, which calls ``restart`` in its
    start cycle and ``step`` in every write cycle."""

    def __init__(self, addr_width, rows, cols):
        self.cols = cols
        self.row = Signal(addr_width, name="wr_row")        # dst + i*ldc
        self.addr = Signal(addr_width, name="wr_addr")      # dst + i*ldc + j
        self.i = Signal(8, name="wr_i")
        self.j = Signal(8, name="wr_j")
        self.sel_row = Signal(range(rows * cols + cols), name="sel_row")   # i*cols
        self.sel = Signal(range(rows * cols + cols), name="sel")           # i*cols + j: the PE written

    def restart(self, dst):
        """Statements that put the walk at result (0, 0) of a destination starting at ``dst``."""
        return [self.row.eq(dst), self.addr.eq(dst), self.i.eq(0), self.j.eq(0), self.sel_row.eq(0),
                self.sel.eq(0)]

    def step(self, m, sp_wr, acc, ldc, m_last, n_last):
        """Write ``acc`` (the accumulator at ``sel``) this cycle and move to the next result. Returns the
        condition that this is the last one, (M-1, N-1)."""
        m.d.comb += [sp_wr.en.eq(1), sp_wr.addr.eq(self.addr), sp_wr.data.eq(acc)]
        last_in_row = self.j == n_last
        with m.If(last_in_row):
            m.d.sync += [self.i.eq(self.i + 1), self.j.eq(0), self.row.eq(self.row + ldc),
                         self.addr.eq(self.row + ldc), self.sel_row.eq(self.sel_row + self.cols),
                         self.sel.eq(self.sel_row + self.cols)]
        with m.Else():
            m.d.sync += [self.j.eq(self.j + 1), self.addr.eq(self.addr + 1), self.sel.eq(self.sel + 1)]
        return last_in_row & (self.i == m_last)
