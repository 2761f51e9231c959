"""The matrix unit's write-back: the M x N results of an MM, in row-major order, one per cycle (or, with
``Config.row_writes``, a row per cycle)."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.timing import MM_DRAIN_CYCLES

from ..memory.banked_scratchpad import bank_index
from .feeder import MatrixFields
from ..ports import SpWriteSignature
from ..memory.scratchpad import or_all
from ..valid_chain import delayed

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

    With ``row_writes`` (decoupled) the walk moves a row at a time: row ``i`` (``N`` words, each on its own bank:
    ``cols < sp_banks``) is written through ``N`` ports in one cycle, the first row ``N - 1`` cycles after
    PE(0,0)'s result (when PE(0, N-1) is done; row ``i`` finishes ``i`` cycles after row 0, never later than its
    turn), each row in a cycle in which the vector lane asks for none of its banks. ``claim`` then holds the
    row's banks (``ga2_sw.timing.mm_write_cycles``, ``ga2_sw.cycles.mm_schedule``).

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
        Decoupled: the bank of the result the writer wants to write this cycle (one bit; with ``row_writes`` the
        banks of its row; none when not writing).
    done : Out(1)
        The last result, (M-1, N-1), is written this cycle.
    sp_wr : Out(SpWriteSignature), or Out(SpWriteSignature).array(cols) with ``row_writes``
        Scratchpad write port; with ``row_writes`` one per array column (port ``j`` writes column ``j``).
    """

    def __init__(self, *, rows, cols, addr_width, banks=None, row_writes=False):
        self._rows, self._cols, self._addr_width = rows, cols, addr_width
        self._banks, self._row_writes = banks, bool(row_writes)
        aw = addr_width
        super().__init__({
            "dst": In(aw), "fields": In(MatrixFields),
            "acc": In(data.ArrayLayout(signed(32), rows * cols)),
            "done": Out(1),
            "sp_wr": Out(SpWriteSignature(aw)).array(cols) if row_writes else Out(SpWriteSignature(aw)),
            **({"go": In(1), "vector_banks_next": In(banks), "busy": Out(1), "claim": Out(banks)}
               if banks is not None else {"en": In(1)}),
        })

    @property
    def write_ports(self):
        """The scratchpad write ports: one, or with ``row_writes`` one per column."""
        return list(self.sp_wr) if self._row_writes else [self.sp_wr]

    def elaborate(self, platform):
        m = Module()
        if self._banks is not None:
            en, en_next, dst, fields = self._phases(m)
            if self._row_writes:
                self._row_walk(m, en, en_next, dst, fields)
                return m
        else:
            en, dst, fields = self.en, self.dst, self.fields
            en_next = None
        self._element_walk(m, en, en_next, dst, fields)
        return m

    def _element_walk(self, m, en, en_next, dst, fields):
        """The walk of one element a cycle: row ``i`` of the tile at ``dst + i*ldc``, its elements one after the
        other; decoupled, each write waits for a cycle in which the vector lane does not claim its bank, and the
        bank of the next write is claimed from the feeder a cycle ahead (``en_next``; None in order)."""
        rows, cols, aw = self._rows, self._cols, self._addr_width
        row = Signal(aw)                                # dst + i*ldc
        # dst + (i+1)*ldc. Decoupled, a register stepped with `row`: the next row's bank is then decoded from a
        # register, not from an adder (row -> the ldc adder -> its bank -> `claim` was a 25F seed's worst path,
        # 98.89 MHz). In order, the sum itself (no bank is decoded from it).
        row_stride = fields.ldc
        if self._banks is not None:
            row_next = Signal(aw, name="next_row")

            def next_row_is(value):
                return [row_next.eq(value)]
        else:
            row_next = row + row_stride

            def next_row_is(value):
                return []
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
        if self._banks is not None:
            on_bank, next_bank = Signal(self._banks, name="on_bank"), Signal(self._banks)
            vector_banks = Signal(self._banks, name="writer_vector_banks")     # its own copy
            m.d.sync += vector_banks.eq(self.vector_banks_next)
            m.d.comb += [write.eq(en & ~(vector_banks & on_bank).any()), next_bank.eq(on_bank)]
            m.d.sync += [on_bank.eq(next_bank), self.claim.eq(Mux(en_next, next_bank, 0))]
        else:
            on_bank = None
            m.d.comb += write.eq(en)

        def bank_moves_to(a):
            """The walk's next address is ``a``: decoupled, its bank is the next cycle's."""
            if on_bank is not None:
                m.d.comb += next_bank.eq(1 << bank_index(a, self._banks))

        with m.If(~en):
            m.d.sync += [row.eq(dst), *next_row_is(dst + row_stride), addr.eq(dst), i.eq(0), j.eq(0), sel_row.eq(0),
                         sel.eq(0)]
            bank_moves_to(dst)
        with m.Elif(write & last_in_row):
            m.d.sync += [i.eq(i + 1), j.eq(0),
                         row.eq(row_next),
                         *next_row_is(row_next + row_stride),
                         addr.eq(row_next),
                         sel_row.eq(sel_row + cols),
                         sel.eq(sel_row + cols)]
            bank_moves_to(row_next)
        with m.Elif(write):
            m.d.sync += [j.eq(j + 1), addr.eq(addr + 1), sel.eq(sel + 1)]
            bank_moves_to(addr + 1)

        m.d.comb += [
            self.sp_wr.en.eq(write),
            self.sp_wr.addr.eq(addr),
            self.sp_wr.data.eq(self.acc[0] if rows * cols == 1 else self.acc[sel]),
            self.done.eq(write & last_in_row & (i == fields.m_last)),
        ]

    def _phases(self, m):
        """Decoupled: the tile's own destination and fields, and the write phase (``en``): idle, the writer
        follows ``dst`` and ``fields``; ``go`` keeps them and starts the wait for PE(0,0)'s result; the write
        phase lasts until the last write."""
        dst, fields = Signal.like(self.dst, name="tile_dst"), Signal(MatrixFields, name="tile_fields")
        waiting, writing = Signal(), Signal()
        # `busy` (waiting | writing) is a register of its own, loaded with both flags' next values: it goes to
        # the scoreboard and the sequencer's issue decision across the die, and a gate in front of that wire
        # made it the worst path of 25F seeds (the writer's busy -> the issue -> the PC's enable, 12.2 ns).
        busy = Signal(name="busy_r")
        m.d.comb += self.busy.eq(busy)
        with m.If(~busy):
            m.d.sync += [dst.eq(self.dst), fields.eq(self.fields)]
        ready = delayed(m, self.go, MM_DRAIN_CYCLES, "result_ready")      # PE(0,0)'s result is there
        if self._row_writes:         # ... and PE(0, N-1)'s another N - 1 cycles later
            lag = Signal.like(fields.n_last, name="row_lag")
            with m.If(ready):
                m.d.sync += lag.eq(fields.n_last)
            with m.Elif(lag != 0):
                m.d.sync += lag.eq(lag - 1)
            first = (ready & (fields.n_last == 0)) | (lag == 1)
        else:
            first = ready
        waiting_next = ~first & (waiting | self.go)
        # The last write of a tile comes before the next tile's `go`, so `first` and `done` never meet.
        writing_next = first | (writing & ~self.done)
        m.d.sync += [waiting.eq(waiting_next), writing.eq(writing_next), busy.eq(waiting_next | writing_next)]
        return writing, writing_next, dst, fields

    def _row_walk(self, m, en, en_next, dst, fields):
        """``row_writes``: row ``i`` of the tile, the words ``dst + i*ldc + j`` for ``j <= n_last``, through port
        ``j`` in one cycle; the walk, the banks and the claim as the element walk's, a row wide."""
        rows, cols, aw, banks = self._rows, self._cols, self._addr_width, self._banks
        row, row_next = Signal(aw, name="row_addr"), Signal(aw, name="next_row_addr")     # dst + i*ldc, + ldc
        i = Signal(range(rows + 1), name="row_index")
        used = Cat(*(fields.n_last >= j for j in range(cols)))      # the tile's columns: constant while writing
        # The banks of the row being written (one bit each), a register stepped with the walk, as the element
        # walk's `on_bank`: the write decision is the vector lane's banks against two registers.
        on_banks, next_banks = Signal(banks, name="on_banks"), Signal(banks)
        vector_banks = Signal(banks, name="writer_vector_banks")
        m.d.sync += vector_banks.eq(self.vector_banks_next)
        write = Signal()
        m.d.comb += [write.eq(en & ~(vector_banks & on_banks).any()), next_banks.eq(on_banks)]
        m.d.sync += [on_banks.eq(next_banks), self.claim.eq(Mux(en_next, next_banks, 0))]

        def banks_of(a):
            """The banks of the row starting at ``a`` (its words on distinct banks: cols < sp_banks)."""
            return or_all([Mux(used[j], Const(1, banks) << bank_index(a + j, banks), 0)
                           for j in range(cols)])

        with m.If(~en):
            m.d.sync += [row.eq(dst), row_next.eq(dst + fields.ldc), i.eq(0)]
            m.d.comb += next_banks.eq(banks_of(dst))
        with m.Elif(write):
            m.d.sync += [row.eq(row_next), row_next.eq(row_next + fields.ldc), i.eq(i + 1)]
            m.d.comb += next_banks.eq(banks_of(row_next))
        for j, port in enumerate(self.sp_wr):
            column = Array(self.acc[r * cols + j] for r in range(rows))
            m.d.comb += [port.en.eq(write & used[j]), port.addr.eq(row + j), port.data.eq(column[i])]
        m.d.comb += self.done.eq(write & (i == fields.m_last))
