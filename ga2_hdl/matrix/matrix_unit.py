"""The matrix unit: executes MM on the systolic array, with the operand feeder of the chip's mode."""

from amaranth.hdl import Module, Signal
from amaranth.lib.wiring import In, Out, connect, flipped

from .feeder import MatrixFields, latch_fields
from ..ports import SpWriteSignature, Unit
from .result_writer import ResultWriter
from .staged_feeder import StagedFeeder
from .stream_feeder import StreamFeeder, read_ports_of
from .systolic import SystolicArray
from .tiled_array import TiledSystolicArray

__all__ = ["MatrixUnit"]


class MatrixUnit(Unit):
    """Executes ``MM dst A B M K N tb lda ldb ldc`` (docs/ISA.md) on a ``rows`` x ``cols`` systolic array.

    ``sp[dst + i*ldc + j] = sum_k s8(sp[A + i*lda + k]) * s8(Bop(k, j))`` for ``i < M``, ``j < N``, with
    ``Bop(k, j) = sp[B + k*ldb + j]`` (``tb = 0``) or ``sp[B + j*ldb + k]`` (``tb = 1``); operands are the low
    8 bits of their words, results whole int32 words (wrapping). The fields are ``dst = instr.dst``,
    ``A = instr.src``, ``B = instr.len``, ``K = instr.k`` and ``M``, ``N``, ``tb``, ``lda``, ``ldb``, ``ldc``;
    they are latched at ``start``. The unit does not validate: the sequencer has already rejected bad shapes
    (``M``, ``N``, ``K`` >= 1, ``M <= rows``, ``N <= cols``) and addresses.

    The operands come through the feeder of the configuration's mode, and the ``M*N`` results are written one
    per cycle in row-major order by the :class:`~ga2_hdl.matrix.result_writer.ResultWriter`. All of an MM's reads
    happen before its first write, so a destination that overlaps the operands gets the product of their old
    values.

    * In order, :class:`~ga2_hdl.matrix.staged_feeder.StagedFeeder` on a :class:`~ga2_hdl.matrix.systolic.SystolicArray`:
      one operand word per cycle through ``sp_rd``. With ``start`` in cycle 0 the array is cleared in cycle 1,
      fed until the feeder's ``done`` in cycle ``F = (K + 1) * (M + N)``, and the results are written in cycles
      ``F + 1 .. X`` while the array keeps stepping; ``busy`` for the ``X = F + M*N`` cycles after ``start``,
      and a new ``start`` is accepted in cycle ``X + 1``.
    * Decoupled, :class:`~ga2_hdl.matrix.stream_feeder.StreamFeeder` on a :class:`~ga2_hdl.matrix.tiled_array.TiledSystolicArray`:
      one k-slice per cycle through ``a_rd`` and ``b_rd``. ``busy`` until the last slice's last read (cycle
      ``L``, ``done``), and a new ``start`` is accepted from cycle ``L + 1`` on: the array takes the next tile's
      slices right behind this one's, and the result writer writes this one's results (``draining``, cycles
      ``L + 1 .. X``) while the next one is read (``ga2_sw.cycles.mm_schedule``).

    Members
    -------
    ctl : In(UnitSignature)
        ``start``, ``instr``; ``busy`` until the unit takes the next ``start``, ``done`` in its last cycle,
        ``draining`` (decoupled) while the result writer has results left to write.
    sp_rd : Out(SpReadSignature)
        In order: the scratchpad read port (1-cycle latency).
    a_rd : Out(SpReadSignature).array(rows)
        Decoupled: the read port of array row ``i``.
    b_rd : Out(SpReadSignature).array(cols)
        Decoupled: the read port of array column ``j``.
    rb_rd : Out(SpReadSignature).array((rows - 1) * cols)
        With ``row_b``: the read port of row ``i``'s B operand of column ``j`` (``rb``), ``i >= 1``.
    sp_wr : Out(SpWriteSignature), or Out(SpWriteSignature).array(cols) with ``row_writes``
        Scratchpad write port(s): the result writer's.
    vector_banks_next : In(sp_banks)
        Decoupled: the banks the vector lane asks port B for in the next cycle; the operands and results on
        them wait then (``ga2_sw.cycles.mm_schedule``). The feeder and the result writer each register it.

    Parameters
    ----------
    rows, cols :
        The array's shape.
    addr_width :
        The scratchpad address's width.
    banks :
        The banks of the decoupled chip's scratchpad (the streaming feeder, the overlapped result writer); None
        for the in-order chip's one memory (the staged feeder).
    read_latency :
        Decoupled: cycles from an operand's read request to its data (``ga2_sw.timing.compute_read_latency``).
    row_b :
        A B operand per array row (``Config.row_b``: MM's ``rb`` and ``sa``).
    row_writes :
        A row of results a cycle, a write port per column (``Config.row_writes``).
    """

    def __init__(self, *, rows, cols, addr_width, banks=None, read_latency=None, row_b=False, row_writes=False):
        self._rows, self._cols, self._row_b, self._row_writes = rows, cols, bool(row_b), bool(row_writes)
        self._decoupled = banks is not None
        # The feeder of the mode, and the result writer, built in elaborate(); their read ports are mirrored on
        # the unit under the same names.
        self._writer_parameters = dict(rows=rows, cols=cols, addr_width=addr_width, banks=banks,
                                       row_writes=row_writes)
        if self._decoupled:
            self._feeder_class, self._feeder_parameters = StreamFeeder, dict(
                rows=rows, cols=cols, addr_width=addr_width, banks=banks, read_latency=read_latency, row_b=row_b)
            members = StreamFeeder.read_members(rows=rows, cols=cols, addr_width=addr_width, row_b=row_b)
            members["vector_banks_next"] = In(banks)
        else:
            self._feeder_class, self._feeder_parameters = StagedFeeder, dict(rows=rows, cols=cols,
                                                                             addr_width=addr_width)
            members = StagedFeeder.read_members(addr_width=addr_width)
        if row_writes:              # the result writer's port per column, each a requester of its own
            members["sp_wr"] = Out(SpWriteSignature(addr_width)).array(cols)
        super().__init__(addr_width=addr_width, members=members, read_port=False)

    @property
    def read_ports(self):
        return read_ports_of(self) if self._decoupled else [self.sp_rd]

    @property
    def write_ports(self):
        return list(self.sp_wr) if self._row_writes else [self.sp_wr]

    def elaborate(self, platform):
        m = Module()
        m.submodules.feeder = feeder = self._feeder_class(**self._feeder_parameters)
        m.submodules.writer = writer = ResultWriter(**self._writer_parameters)
        for port, feeder_port in zip(self.read_ports, feeder.read_ports):
            connect(m, flipped(port), feeder_port)
        for port, writer_port in zip(self.write_ports, writer.write_ports):
            connect(m, flipped(port), writer_port)
        fields = Signal(MatrixFields)
        dst = Signal.like(self.ctl.instr.dst, name="dst")
        m.d.comb += [feeder.ctl.start.eq(self.ctl.start), feeder.ctl.instr.eq(self.ctl.instr),
                     feeder.ctl.fields.eq(fields), writer.dst.eq(dst), writer.fields.eq(fields)]
        if self._decoupled:
            idle = self._overlapped(m, feeder, writer)
        else:
            idle = self._in_order(m, feeder, writer)
        with m.If(idle):     # idle, follow the instruction register: it holds it at the start
            m.d.sync += [*latch_fields(fields, self.ctl.instr), dst.eq(self.ctl.instr.dst)]
        return m

    def _in_order(self, m, feeder, writer):
        """Feed, then write, then take the next MM; returns the idle condition."""
        m.submodules.array = array = SystolicArray(rows=self._rows, cols=self._cols)
        with m.FSM(name="mm_fsm") as fsm:
            with m.State("IDLE"):
                with m.If(self.ctl.start):
                    m.next = "FEED"
            with m.State("FEED"):
                with m.If(feeder.ctl.done):
                    m.next = "WRITE"
            with m.State("WRITE"):
                with m.If(writer.done):
                    m.d.comb += self.ctl.done.eq(1)
                    m.next = "IDLE"
        m.d.comb += self.ctl.busy.eq(~fsm.ongoing("IDLE"))
        # The sequencer starts a unit only when it is idle: `start` needs no gate of the state here.
        writing = fsm.ongoing("WRITE")
        # The array is cleared in cycle 1 from a register rather than in cycle 0 from `start`: `start` comes from
        # the sequencer's decode logic, and the clear fans out to every register of the array. The feeder does
        # not step the array before cycle 3.
        clearing = Signal()
        m.d.sync += clearing.eq(self.ctl.start)
        m.d.comb += [
            feeder.ctl.clear.eq(clearing), array.clear.eq(clearing),
            array.a.eq(feeder.ctl.a), array.b.eq(feeder.ctl.b),
            # The array keeps stepping while the results are written: the feeder leaves its last flush steps
            # to the write phase (FeederSignature); later steps feed zeros and leave finished sums alone.
            array.step.eq(feeder.ctl.step | writing),
            writer.en.eq(writing), writer.acc.eq(array.acc),
        ]
        # With M = N = 1, PE(0,0) is written in the cycle of its last accumulate: write acc + prod.
        with m.If(feeder.ctl.pe00_late):
            m.d.comb += writer.acc[0].eq(array.acc00_next)
        return fsm.ongoing("IDLE")

    def _overlapped(self, m, feeder, writer):
        """Decoupled: the unit is busy while the feeder reads (the next MM may start in the cycle after its last
        read), and the result writer drains the tile beside the next one (``draining``); returns the idle
        condition of the feeder, whose fields the writer takes with the last read."""
        m.submodules.array = array = TiledSystolicArray(rows=self._rows, cols=self._cols, per_cell_b=self._row_b)
        busy = Signal()
        with m.If(self.ctl.start):
            m.d.sync += busy.eq(1)
        with m.If(feeder.ctl.done):
            m.d.sync += busy.eq(0)
        m.d.comb += [
            self.ctl.busy.eq(busy), self.ctl.done.eq(feeder.ctl.done), self.ctl.draining.eq(writer.busy),
            feeder.vector_banks_next.eq(self.vector_banks_next), writer.vector_banks_next.eq(self.vector_banks_next),
            feeder.writer_banks.eq(writer.claim), feeder.writer_busy.eq(writer.busy),
            array.a.eq(feeder.ctl.a), array.b.eq(feeder.ctl.b), array.valid.eq(feeder.ctl.step),
            array.last.eq(feeder.ctl.last),
            writer.go.eq(feeder.ctl.done), writer.acc.eq(array.out),
        ]
        return ~busy
