"""The matrix unit's write-back: the M x N results of an MM, in row-major order, one per cycle."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.timing import MM_DRAIN_CYCLES

from .banked_scratchpad import bank_index
from .feeder import MatrixFields
from .ports import SpWriteSignature, check_config, sp_addr_width
from .valid_chain import delayed

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

    In order the matrix unit drives ``en`` (its write phase) and holds ``dst`` and ``fields`` still. Decoupled
    the writer runs beside the matrix unit's next instruction: ``go`` (the feeder's last cycle, ``L``) hands it
    the tile, whose ``dst`` and ``fields`` it has followed while idle and now keeps; it waits
    ``MM_DRAIN_CYCLES`` for PE(0,0)'s result and writes from cycle ``L + MM_DRAIN_CYCLES + 1`` on, ``busy``
    from ``L + 1`` to its last write. Its request has port B before the next tile's operand reads, which keep
    off the bank in ``claim``.

    Members
    -------
    dst : In(addr_width)
        The destination; in order the walk loads it in every cycle with ``en`` low, so it must be valid in the
        cycle before the write phase begins; decoupled it is taken with ``go``.
    fields : In(MatrixFields)
        ``M - 1``, ``N - 1`` and ``ldc``: in order valid while ``en`` is high; decoupled taken with ``go``.
    en : In(1)
        In order: the write phase: write the current result this cycle and move to the next. Low, the walk goes
        back to result (0, 0) of ``dst``.
    go : In(1)
        Decoupled: the tile's last slice has been read (this cycle); the writer is idle.
    acc : In(ArrayLayout(signed(32), rows * cols))
        The results: PE(r, c)'s is ``acc[r * cols + c]``.
    vector_banks_next : In(sp_banks)
        Decoupled only: the banks the vector lane asks port B for in the next cycle (one bit each), registered
        here; a result on one of them waits a cycle then.
    busy : Out(1)
        Decoupled: a tile's results are still to write (from the cycle after ``go`` to the last write).
    claim : Out(sp_banks)
        Decoupled: the bank of the result the writer wants to write this cycle (one bit; none when not writing).
    done : Out(1)
        The last result, (M-1, N-1), is written this cycle.
    sp_wr : Out(SpWriteSignature)
        Scratchpad write port.
    """

    def __init__(self, config):
        self._config = check_config(config)
        aw = sp_addr_width(config)
        super().__init__({
            "dst": In(aw), "fields": In(MatrixFields),
            "acc": In(data.ArrayLayout(signed(32), config.rows * config.cols)),
            "done": Out(1), "sp_wr": Out(SpWriteSignature(aw)),
            **({"go": In(1), "vector_banks_next": In(config.sp_banks), "busy": Out(1), "claim": Out(config.sp_banks)}
               if config.decoupled else {"en": In(1)}),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._config.rows, self._config.cols
        aw = sp_addr_width(self._config)
        if self._config.decoupled:
            en, en_next, dst, fields = self._phases(m)
        else:
            en, dst, fields = self.en, self.dst, self.fields

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
        # The bank the writer claims from the next tile's operand reads is a register too, loaded with the next
        # cycle's bank and write phase, so that the feeder sees it as it sees the vector lane's banks: a register
        # and an OR.
        if self._config.decoupled:
            on_bank, next_bank = Signal(self._config.sp_banks, name="on_bank"), Signal(self._config.sp_banks)
            vector_banks = Signal(self._config.sp_banks, name="writer_vector_banks")     # its own copy
            m.d.sync += vector_banks.eq(self.vector_banks_next)
            m.d.comb += [write.eq(en & ~(vector_banks & on_bank).any()), next_bank.eq(on_bank)]
            m.d.sync += [on_bank.eq(next_bank), self.claim.eq(Mux(en_next, next_bank, 0))]
        else:
            on_bank = None
            m.d.comb += write.eq(en)

        def bank_moves_to(a):
            """The walk's next address is ``a``: decoupled, its bank is the next cycle's."""
            if on_bank is not None:
                m.d.comb += next_bank.eq(1 << bank_index(a, self._config))

        with m.If(~en):
            m.d.sync += [row.eq(dst), addr.eq(dst), i.eq(0), j.eq(0), sel_row.eq(0), sel.eq(0)]
            bank_moves_to(dst)
        with m.Elif(write & last_in_row):
            m.d.sync += [i.eq(i + 1), j.eq(0),
                         row.eq(row + fields.ldc),
                         addr.eq(row + fields.ldc),
                         sel_row.eq(sel_row + cols),
                         sel.eq(sel_row + cols)]
            bank_moves_to(row + fields.ldc)
        with m.Elif(write):
            m.d.sync += [j.eq(j + 1), addr.eq(addr + 1), sel.eq(sel + 1)]
            bank_moves_to(addr + 1)

        m.d.comb += [
            self.sp_wr.en.eq(write),
            self.sp_wr.addr.eq(addr),
            self.sp_wr.data.eq(self.acc[0] if rows * cols == 1 else self.acc[sel]),
            self.done.eq(write & last_in_row & (i == fields.m_last)),
        ]
        return m

    def _phases(self, m):
        """Decoupled: the tile's own destination and fields, and the write phase (``en``): idle, the writer
        follows ``dst`` and ``fields``; ``go`` keeps them and starts the wait for PE(0,0)'s result; the write
        phase lasts until the last write."""
        dst, fields = Signal.like(self.dst, name="tile_dst"), Signal(MatrixFields, name="tile_fields")
        waiting, writing = Signal(), Signal()
        m.d.comb += self.busy.eq(waiting | writing)
        with m.If(~self.busy):
            m.d.sync += [dst.eq(self.dst), fields.eq(self.fields)]
        ready = delayed(m, self.go, MM_DRAIN_CYCLES, "result_ready")
        with m.If(self.go):
            m.d.sync += waiting.eq(1)
        with m.If(ready):
            m.d.sync += waiting.eq(0)
        # The last write of a tile comes before the next tile's `go`, so `ready` and `done` never meet.
        writing_next = ready | (writing & ~self.done)
        m.d.sync += writing.eq(writing_next)
        return writing, writing_next, dst, fields
