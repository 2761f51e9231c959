"""The matrix unit's write-back: the M x N results of an MM, in row-major order, one per cycle."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .banked_scratchpad import bank_index
from .feeder import MatrixFields
from .ports import SpWriteSignature, check_config, sp_addr_width

__all__ = ["ResultWriter"]


class ResultWriter(wiring.Component):
    """Writes result (i, j) of an ``M`` x ``N`` product, the accumulator of PE(i, j), to ``dst + i*ldc + j``.

    While ``en`` is low the walk waits at result (0, 0) of the destination ``dst``. In every cycle with ``en``
    high the current result is written and the walk moves to the next one in row-major order; decoupled, not in
    a cycle in which the vector lane asks for the result's bank (it shares port B and has it first). The walk
    restarts from the write phase's own enable, a register, rather than from the matrix unit's ``start``:
    ``start`` is the sequencer's issue logic, and behind it the counters' resets were the decoupled chip's
    slowest path on the 25F (issue logic to ``j`` and ``sel_row``, 96.42 MHz median). Row-major
    order is what lets the unit write while the array still finishes: PE(i, j) completes ``i + j`` steps after PE(0, 0), and
    its result is written ``i*N + j >= i + j`` cycles after PE(0, 0)'s. The address and the accumulator index
    ``i*cols + j`` are stepped with adders only: no multiplier sits between the counters and the write port or
    the accumulator multiplexer.

    Members
    -------
    dst : In(addr_width)
        The destination; the walk loads it in every cycle with ``en`` low, so it must be valid in the cycle
        before the write phase begins.
    fields : In(MatrixFields)
        ``M - 1``, ``N - 1`` and ``ldc``, valid while ``en`` is high.
    en : In(1)
        The write phase: write the current result this cycle and move to the next, unless ``vector_banks``
        holds its bank. Low, the walk goes back to result (0, 0) of ``dst``.
    acc : In(ArrayLayout(signed(32), rows * cols))
        The results: PE(r, c)'s accumulator is ``acc[r * cols + c]``.
    vector_banks : In(sp_banks)
        Decoupled only: the banks the vector lane asks port B for in this cycle (one bit each); a result on one
        of them waits a cycle.
    done : Out(1)
        The last result, (M-1, N-1), is written this cycle.
    sp_wr : Out(SpWriteSignature)
        Scratchpad write port.
    """

    def __init__(self, config):
        self._config = check_config(config)
        aw = sp_addr_width(config)
        super().__init__({
            "dst": In(aw), "fields": In(MatrixFields), "en": In(1),
            "acc": In(data.ArrayLayout(signed(32), config.rows * config.cols)),
            "done": Out(1), "sp_wr": Out(SpWriteSignature(aw)),
            **({"vector_banks": In(config.sp_banks)} if config.decoupled else {}),
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
        write = Signal()
        # Decoupled: the bank of `addr`, one bit per bank, a register stepped with it, so that the write decision
        # is the vector lane's bank bits against a register (the bank adder between `addr` and the decision put
        # it, and the counters' resets behind it, at 91.38 MHz on a 25F seed).
        if self._config.decoupled:
            on_bank = Signal(self._config.sp_banks, name="on_bank")
            m.d.comb += write.eq(self.en & ~(self.vector_banks & on_bank).any())
        else:
            on_bank = None
            m.d.comb += write.eq(self.en)

        def move_on_bank_to(a):
            return [] if on_bank is None else [on_bank.eq(1 << bank_index(a, self._config))]

        with m.If(~self.en):
            m.d.sync += [row.eq(self.dst), addr.eq(self.dst), i.eq(0), j.eq(0), sel_row.eq(0), sel.eq(0),
                         *move_on_bank_to(self.dst)]
        with m.Elif(write & last_in_row):
            m.d.sync += [i.eq(i + 1), j.eq(0),
                         row.eq(row + fields.ldc),
                         addr.eq(row + fields.ldc),
                         *move_on_bank_to(row + fields.ldc),
                         sel_row.eq(sel_row + cols),
                         sel.eq(sel_row + cols)]
        with m.Elif(write):
            m.d.sync += [j.eq(j + 1), addr.eq(addr + 1), *move_on_bank_to(addr + 1), sel.eq(sel + 1)]

        m.d.comb += [
            self.sp_wr.en.eq(write),
            self.sp_wr.addr.eq(addr),
            self.sp_wr.data.eq(self.acc[0] if rows * cols == 1 else self.acc[sel]),
            self.done.eq(write & last_in_row & (i == fields.m_last)),
        ]
        return m
