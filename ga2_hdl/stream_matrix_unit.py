"""The streaming matrix unit: executes MM on the systolic array in the chip's decoupled mode, where the
scratchpad gives it one read port per array row and one per array column, so a whole k-slice is read
every cycle."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib.wiring import Out

from .ports import SpReadSignature, Unit, check_config, sp_addr_width
from .result_walk import ResultWalk
from .systolic import SystolicArray

__all__ = ["StreamMatrixUnit"]


class StreamMatrixUnit(Unit):
    """Executes ``MM dst A B M K N tb lda ldb ldc`` (docs/ISA.md) on a ``rows`` x ``cols`` systolic array,
    reading one k-slice per cycle through ``rows + cols`` scratchpad read ports.

    The instruction and its semantics are those of :class:`~ga2_hdl.matrix_unit.MatrixUnit`:
    ``sp[dst + i*ldc + j] = sum_k s8(sp[A + i*lda + k]) * s8(Bop(k, j))`` for ``i < M``, ``j < N``, with
    ``Bop(k, j) = sp[B + k*ldb + j]`` (``tb = 0``) or ``sp[B + j*ldb + k]`` (``tb = 1``); operands are the
    low 8 bits of their words, results whole int32 words (wrapping). The fields are ``dst = instr.dst``,
    ``A = instr.src``, ``B = instr.len``, ``K = instr.k`` and ``M``, ``N``, ``tb``, ``lda``, ``ldb``,
    ``ldc``; they are latched at ``start``. The unit does not validate: the sequencer has already rejected
    bad shapes (``M``, ``N``, ``K`` >= 1, ``M <= rows``, ``N <= cols``) and addresses.

    Schedule, with ``start`` in cycle 0 (busy time ``X = K + 3 + M*N``):

    * cycles ``1 .. K``: slice ``k = cycle - 1`` is read, ``A[i][k]`` on ``a_rd[i]`` (``i < M``) and
      ``Bop(k, j)`` on ``b_rd[j]`` (``j < N``); the other ports stay disabled. The array is cleared in
      cycle 1.
    * cycle ``k + 2``: slice ``k`` arrives and is registered into the hold registers (zero for rows
      ``>= M`` and columns ``>= N``, and in every cycle without an arriving slice).
    * cycles ``3 .. X``: the array steps; step ``k`` (cycle ``3 + k``) takes slice ``k`` from the hold
      registers, and the steps from ``K`` on feed zeros. PE(r, c) completes its sum with the accumulate of
      step ``K + r + c`` (cycle ``K + 3 + r + c``).
    * cycles ``K + 4 .. X``: the ``M*N`` results, one write per cycle in row-major order; element (i, j)
      is written in cycle ``K + 4 + i*N + j >= K + 4 + i + j``, i.e. after its PE has completed it. Every
      operand has been read by then, so a destination that overlaps the operands gets the product of
      their old values.

    A new ``start`` is accepted in cycle ``X + 1`` (back to back).

    Members
    -------
    start : In(1)
        One-cycle pulse: start the instruction on ``instr``.
    instr : In(InstrLayout)
        The decoded instruction, valid in the ``start`` cycle only.
    busy : Out(1)
        High for the ``X`` cycles after ``start``.
    done : Out(1)
        High in the last busy cycle only.
    a_rd : Out(SpReadSignature).array(rows)
        Scratchpad read port of array row ``i`` (1-cycle latency): column ``k`` of A.
    b_rd : Out(SpReadSignature).array(cols)
        Scratchpad read port of array column ``j`` (1-cycle latency): row ``k`` of Bop.
    sp_wr : Out(SpWriteSignature)
        Scratchpad write port.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`ga2_sw.config.Config`.
    """

    def __init__(self, config):
        aw = sp_addr_width(check_config(config))
        super().__init__(config, {"a_rd": Out(SpReadSignature(aw)).array(config.rows),
                                  "b_rd": Out(SpReadSignature(aw)).array(config.cols)}, read_port=False)

    @property
    def read_ports(self):
        return [*self.a_rd, *self.b_rd]

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._config.rows, self._config.cols
        aw = sp_addr_width(self._config)
        instr = self.ctl.instr

        m.submodules.array = array = SystolicArray(rows, cols)

        # -- fields latched at start ----------------------------------------------------------------------
        # Addresses are kept to the scratchpad's address width: the sequencer has checked that every
        # address MM touches is < sp_words, so arithmetic modulo 2**aw gives the right address.
        ldc = Signal(12)
        b_kstride = Signal(12)        # address step from Bop(k, j) to Bop(k+1, j): ldb, or 1 when tb
        m_last = Signal(8)            # M - 1
        n_last = Signal(8)            # N - 1
        k_last = Signal(16)           # K - 1

        # -- read side: one address register per port, stepped by adders -------------------------------
        # The port addresses come straight from registers (no adder between them and the RAM). Row i's
        # port walks along row i of A (stride 1); column j's walks down column j of Bop (stride b_kstride).
        a_addr = [Signal(aw, name=f"a_addr{i}") for i in range(rows)]
        b_addr = [Signal(aw, name=f"b_addr{j}") for j in range(cols)]
        a_en = [Signal(name=f"a_en{i}") for i in range(rows)]     # i < M: the port is used at all
        b_en = [Signal(name=f"b_en{j}") for j in range(cols)]     # j < N
        rd_k = Signal(16)             # slice being read

        # -- arrival side ---------------------------------------------------------------------------------
        arr_valid = Signal()          # a slice is on the read ports' data this cycle
        hold_a = [Signal(signed(8), name=f"hold_a{r}") for r in range(rows)]
        hold_b = [Signal(signed(8), name=f"hold_b{c}") for c in range(cols)]

        clearing = Signal()           # cycle 1: zero the array
        clearing_d = Signal()         # cycle 2: no step yet (step 0 is in cycle 3)
        flush_cnt = Signal(2)

        # -- write side: results in row-major order ------------------------------------------------------
        walk = ResultWalk(aw, rows, cols)

        with m.FSM(name="smm_fsm") as fsm:
            with m.State("IDLE"):
                with m.If(self.ctl.start):
                    m.d.sync += [
                        ldc.eq(instr.ldc),
                        b_kstride.eq(Mux(instr.tb, 1, instr.ldb)),
                        m_last.eq(instr.M - 1),
                        n_last.eq(instr.N - 1),
                        k_last.eq(instr.K - 1),
                        rd_k.eq(0),
                        flush_cnt.eq(0),
                        *walk.restart(instr.dst),
                    ]
                    # i and j are constants here, so these are constant multiplies (shifts and adds),
                    # done once per instruction. Bop(0, j) is j*ldb past B when B is stored transposed.
                    for i in range(rows):
                        m.d.sync += [a_addr[i].eq(instr.A + i * instr.lda), a_en[i].eq(instr.M > i)]
                    for j in range(cols):
                        m.d.sync += [b_addr[j].eq(instr.B + Mux(instr.tb, j * instr.ldb, j)),
                                     b_en[j].eq(instr.N > j)]
                    m.next = "READ"

            with m.State("READ"):
                # K cycles, one whole slice each: A's k stride is 1, Bop's is b_kstride.
                for i in range(rows):
                    m.d.comb += [self.a_rd[i].en.eq(a_en[i]), self.a_rd[i].addr.eq(a_addr[i])]
                    m.d.sync += a_addr[i].eq(a_addr[i] + 1)
                for j in range(cols):
                    m.d.comb += [self.b_rd[j].en.eq(b_en[j]), self.b_rd[j].addr.eq(b_addr[j])]
                    m.d.sync += b_addr[j].eq(b_addr[j] + b_kstride)
                m.d.sync += rd_k.eq(rd_k + 1)
                with m.If(rd_k == k_last):
                    m.next = "FLUSH"

            with m.State("FLUSH"):
                # Cycles K+1 .. K+3: the last slice arrives (K+1), is held (K+2) and steps the array (K+2,
                # step K-1); PE(0,0) accumulates its last product at step K (cycle K+3), so its result
                # can be written from cycle K+4 on.
                with m.If(flush_cnt == 2):
                    m.next = "WRITE"
                with m.Else():
                    m.d.sync += flush_cnt.eq(flush_cnt + 1)

            with m.State("WRITE"):
                # Row-major order keeps each write behind its PE: (i, j) at K+4 + i*N + j, completed at
                # K+4 + i + j. The array keeps stepping with zero inputs, which leaves finished sums alone.
                acc = array.acc[0] if rows * cols == 1 else array.acc[walk.sel]
                with m.If(walk.step(m, self.sp_wr, acc, ldc, m_last, n_last)):
                    m.d.comb += self.ctl.done.eq(1)
                    m.next = "IDLE"

        m.d.comb += self.ctl.busy.eq(~fsm.ongoing("IDLE"))

        # The array is cleared in cycle 1 from a register rather than in cycle 0 from `start`: `start` comes
        # from the sequencer's decode logic, and the clear fans out to every register of the array.
        m.d.sync += [
            clearing.eq(fsm.ongoing("IDLE") & self.ctl.start),
            clearing_d.eq(clearing),
        ]

        # The hold registers sit between the RAM outputs (slow clk-to-q) and the array's multipliers. A
        # disabled read port keeps its old data, so a port's data is taken only when it was enabled in
        # the previous cycle (arr_valid and its en); otherwise the hold register loads zero. That zeroes
        # rows >= M and columns >= N and feeds the steps from K on with zeros.
        m.d.sync += arr_valid.eq(fsm.ongoing("READ"))
        for hold, en, port in [*zip(hold_a, a_en, self.a_rd), *zip(hold_b, b_en, self.b_rd)]:
            m.d.sync += hold.eq(Mux(arr_valid & en, port.data[0:8].as_signed(), 0))
        for r, hold in enumerate(hold_a):
            m.d.comb += array.a[r].eq(hold)
        for c, hold in enumerate(hold_b):
            m.d.comb += array.b[c].eq(hold)

        # Steps run from cycle 3 (step 0, slice 0 in the hold registers) to the last write; the cycle-1 clear
        # and cycle 2 (no slice held yet) are the only busy cycles without one. K >= 1 gives X >= 5.
        m.d.comb += [
            array.step.eq(self.ctl.busy & ~clearing & ~clearing_d),
            array.clear.eq(clearing),
        ]
        return m
