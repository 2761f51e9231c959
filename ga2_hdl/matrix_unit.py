"""The matrix unit: executes MM on the systolic array, reading operands from and writing results to the
scratchpad one word per cycle."""

from amaranth.hdl import Module, Mux, Signal, signed

from .ports import Unit, sp_addr_width
from .result_walk import ResultWalk
from .systolic import SystolicArray

__all__ = ["MatrixUnit"]


class MatrixUnit(Unit):
    """Executes ``MM dst A B M K N tb lda ldb ldc`` (docs/ISA.md) on a ``rows`` x ``cols`` systolic array.

    ``sp[dst + i*ldc + j] = sum_k s8(sp[A + i*lda + k]) * s8(Bop(k, j))`` for ``i < M``, ``j < N``, with
    ``Bop(k, j) = sp[B + k*ldb + j]`` (``tb = 0``) or ``sp[B + j*ldb + k]`` (``tb = 1``); operands are the low
    8 bits of their words, results whole int32 words. The fields are ``dst = instr.dst``, ``A = instr.src``,
    ``B = instr.len``, ``K = instr.k`` and ``M``, ``N``, ``tb``, ``lda``, ``ldb``, ``ldc``; they are latched
    at ``start``. The unit does not validate: the sequencer has already rejected bad shapes and addresses.

    Schedule, with ``start`` in cycle 0 (busy time ``X = (K + 1) * (M + N) + M*N``):

    * cycles ``1 .. K*(M+N)``: operand reads, one word per cycle, in k-slices. Element ``e`` of slice ``k``
      (``A[0][k] .. A[M-1][k]`` then ``Bop(k, 0) .. Bop(k, N-1)``) is read in cycle ``1 + k*(M+N) + e``
      and arrives the cycle after. Arrived elements wait in hold registers; array step ``k`` fires in the
      cycle the slice's last element arrives (``1 + (k+1)*(M+N)``), taking that element straight from
      the read port, so reads continue without a bubble.
    * cycles ``K*(M+N) + 2 .. (K+1)*(M+N)``: ``M + N - 1`` flush steps with zero inputs.
    * cycles ``(K+1)*(M+N) + 1 .. X``: the ``M*N`` results, one write per cycle in row-major order.

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
    sp_rd : Out(SpReadSignature)
        Scratchpad read port (1-cycle latency).
    sp_wr : Out(SpWriteSignature)
        Scratchpad write port.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`ga2_sw.config.Config`.
    """

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._config.rows, self._config.cols
        aw = sp_addr_width(self._config)
        instr = self.ctl.instr

        m.submodules.array = array = SystolicArray(rows, cols)

        # -- fields latched at start ----------------------------------------------------------------------
        # Addresses are kept to the scratchpad's address width: the sequencer has checked that every
        # address MM touches is < sp_words, so arithmetic modulo 2**aw gives the right address.
        lda = Signal(12)
        ldc = Signal(12)
        b_estride = Signal(12)        # address step from Bop(k, j) to Bop(k, j+1): 1, or ldb when tb
        b_kstride = Signal(12)        # address step from Bop(k, j) to Bop(k+1, j): ldb, or 1 when tb
        m_last = Signal(8)            # M - 1
        n_last = Signal(8)            # N - 1
        k_last = Signal(16)           # K - 1
        mn_last = Signal(9)           # M + N - 1: the flush state lasts M + N cycles
        single = Signal()             # M = N = 1: the one result is written as PE(0,0) completes it

        # -- read side --------------------------------------------------------------------------------
        rd_addr = Signal(aw)          # the address on the read port, a register (no adder before the RAM)
        a_base = Signal(aw)           # A + k: where column k of A starts
        b_base = Signal(aw)           # B + k*ldb (tb = 0) or B + k (tb = 1): where Bop(k, 0) is
        rd_is_a = Signal()            # reading the A part of the slice (else the B part)
        rd_idx = Signal(8)            # row i (A part) or column j (B part) being read
        rd_k = Signal(16)             # slice being read

        # -- arrival side: the read side's position, one cycle later, when its data is on sp_rd.data ---
        arr_valid = Signal()
        arr_is_a = Signal()
        arr_idx = Signal(8)
        arr_last = Signal()           # the last element of a slice arrives: the array steps
        arr_final = Signal()          # ... and it is the last slice
        hold_a = [Signal(signed(8), name=f"hold_a{r}") for r in range(rows)]
        hold_b = [Signal(signed(8), name=f"hold_b{c}") for c in range(cols)]

        clearing = Signal()           # cycle 1: zero the array and the hold registers
        flush_cnt = Signal(9)

        # -- write side: results in row-major order ------------------------------------------------------
        walk = ResultWalk(aw, rows, cols)

        with m.FSM(name="mm_fsm") as fsm:
            with m.State("IDLE"):
                with m.If(self.ctl.start):
                    m.d.sync += [
                        lda.eq(instr.lda),
                        ldc.eq(instr.ldc),
                        b_estride.eq(Mux(instr.tb, instr.ldb, 1)),
                        b_kstride.eq(Mux(instr.tb, 1, instr.ldb)),
                        m_last.eq(instr.M - 1),
                        n_last.eq(instr.N - 1),
                        k_last.eq(instr.K - 1),
                        mn_last.eq(instr.M + instr.N - 1),
                        single.eq((instr.M == 1) & (instr.N == 1)),
                        rd_addr.eq(instr.A),
                        a_base.eq(instr.A),
                        b_base.eq(instr.B),
                        rd_is_a.eq(1),
                        rd_idx.eq(0),
                        rd_k.eq(0),
                        flush_cnt.eq(0),
                        *walk.restart(instr.dst),
                    ]
                    m.next = "READ"

            with m.State("READ"):
                m.d.comb += [self.sp_rd.en.eq(1), self.sp_rd.addr.eq(rd_addr)]
                # Walk the slice with adders only: down column k of A in steps of lda, then along row k
                # of Bop in steps of b_estride; a new slice starts one word further into A and b_kstride
                # further into B.
                with m.If(rd_is_a):
                    with m.If(rd_idx == m_last):
                        m.d.sync += [rd_addr.eq(b_base), rd_is_a.eq(0), rd_idx.eq(0)]
                    with m.Else():
                        m.d.sync += [rd_addr.eq(rd_addr + lda), rd_idx.eq(rd_idx + 1)]
                with m.Else():
                    with m.If(rd_idx == n_last):
                        m.d.sync += [
                            rd_addr.eq(a_base + 1),
                            a_base.eq(a_base + 1),
                            b_base.eq(b_base + b_kstride),
                            rd_is_a.eq(1),
                            rd_idx.eq(0),
                            rd_k.eq(rd_k + 1),
                        ]
                        with m.If(rd_k == k_last):
                            m.next = "FLUSH"
                    with m.Else():
                        m.d.sync += [rd_addr.eq(rd_addr + b_estride), rd_idx.eq(rd_idx + 1)]

            with m.State("FLUSH"):
                # M + N cycles, all of them steps: the first is step K-1, fed by the last operand read,
                # which arrives in this cycle; the other M + N - 1 are the flush steps that carry the last
                # slice to PE(M-1, N-1) and accumulate its product there.
                with m.If(flush_cnt == mn_last):
                    m.next = "WRITE"
                with m.Else():
                    m.d.sync += flush_cnt.eq(flush_cnt + 1)

            with m.State("WRITE"):
                # The array no longer steps, so its accumulators are stable; one result per cycle.
                acc = array.acc[0] if rows * cols == 1 else array.acc[walk.sel]
                acc = Mux(single, array.acc00_next, acc)
                with m.If(walk.step(m, self.sp_wr, acc, ldc, m_last, n_last)):
                    m.d.comb += self.ctl.done.eq(1)
                    m.next = "IDLE"

        m.d.comb += self.ctl.busy.eq(~fsm.ongoing("IDLE"))

        # The array is cleared in cycle 1 from a register rather than in cycle 0 from `start`: `start` comes
        # from the sequencer's decode logic, and the clear fans out to every register of the array. The
        # first step is in cycle 1 + (M + N) >= 3, so the array is zero in time.
        m.d.sync += clearing.eq(fsm.ongoing("IDLE") & self.ctl.start)

        reading = fsm.ongoing("READ")
        slice_end = ~rd_is_a & (rd_idx == n_last)
        m.d.sync += [
            arr_valid.eq(reading),
            arr_is_a.eq(rd_is_a),
            arr_idx.eq(rd_idx),
            arr_last.eq(reading & slice_end),
            arr_final.eq(reading & slice_end & (rd_k == k_last)),
        ]

        # Only the elements of the current slice are ever loaded, so rows >= M and columns >= N keep the
        # zero of the clear; after the last slice's step the registers are zeroed again so that the flush
        # steps feed zeros.
        # Alternative schedule: step k fires one cycle AFTER the slice's last element arrives, from the hold
        # registers only, so no path runs from the RAM's (slow, 5.8 ns) clk-to-q into a multiplier. The last
        # flush step then coincides with the first write; only M = N = 1 has no slack for that and writes
        # PE(0,0)'s acc + prod (acc00_next) instead of acc.
        step_d = Signal()
        final_d = Signal()
        m.d.sync += [step_d.eq(arr_last), final_d.eq(arr_final)]
        operand = self.sp_rd.data[0:8].as_signed()
        for r, hold in enumerate(hold_a):
            with m.If(clearing | final_d):
                m.d.sync += hold.eq(0)
            with m.Elif(arr_valid & arr_is_a & (arr_idx == r)):
                m.d.sync += hold.eq(operand)
            m.d.comb += array.a[r].eq(hold)
        for c, hold in enumerate(hold_b):
            b_here = arr_valid & ~arr_is_a & (arr_idx == c)
            with m.If(clearing | final_d):
                m.d.sync += hold.eq(0)
            with m.Elif(b_here):
                m.d.sync += hold.eq(operand)
            # A slice always ends with a B element (N >= 1). It steps the array in the cycle it arrives,
            # so it bypasses its hold register.
            m.d.comb += array.b[c].eq(hold)

        m.d.comb += [
            array.step.eq(step_d | (fsm.ongoing("FLUSH") & (flush_cnt != 0)) | fsm.ongoing("WRITE")),
            array.clear.eq(clearing),
        ]
        return m
