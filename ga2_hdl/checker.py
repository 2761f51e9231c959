"""Instruction validation at load time: the error code of every instruction-memory word, computed as the
host writes it, so that the sequencer's issue path only reads a 3-bit code."""

from amaranth.hdl import Module, Signal, Mux, Const
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ga2_sw.isa import Op, Err, USED_BITS, INSTR_BITS
from ga2_sw.numerics import MAX_SHIFT

from .ports import InstrLayout

__all__ = ["InstrChecker", "CHECK_LATENCY"]

CHECK_LATENCY = 2       # cycles from the host's write to the error code's write


class InstrChecker(wiring.Component):
    """Validates instruction words against the configuration (docs/ISA.md, "Validation and error codes").

    The check depends only on the word and on fixed sizes, so it runs in a two-stage pipeline beside the
    instruction memory's write port: the word is registered, then the footprint products ``(M-1)*lda``,
    ``(K-1)*ldb`` ... are registered, then the extreme addresses are compared with the memory sizes and the
    code is written (``err_we``). Doing it at issue time instead put an instruction-memory read, a
    multiplier and two adders in series, which held the whole chip to about 40 MHz on ECP5.

    Members
    -------
    we, addr, word : In
        The host's instruction-memory write.
    err_we, err_addr : Out
        Write of the code into the error memory, ``CHECK_LATENCY`` cycles after the host's write.
    err : Out(3)
        ``ga2_sw.isa.Err`` code of the word.
    busy : Out(1)
        A word is still in the pipeline.
    """

    def __init__(self, config):
        self._config = config
        aw = max(1, ceil_log2(config.imem_words))
        super().__init__({"we": In(1), "addr": In(aw), "word": In(INSTR_BITS),
                          "err_we": Out(1), "err_addr": Out(aw), "err": Out(3), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self._config

        # The pipeline is reset-less: a reset right after the host's last write must not drop the word's
        # code, or the error memory would keep the previous word's code for it.
        def reg(shape=1, name=None):
            return Signal(shape, name=name, reset_less=True)

        # Stage 1: the word as written.
        v1, addr1 = reg(name="v1"), reg(len(self.addr), name="addr1")
        word1 = reg(INSTR_BITS, name="word1")
        m.d.sync += [v1.eq(self.we), addr1.eq(self.addr), word1.eq(self.word)]
        w = InstrLayout(word1)
        op = w.op

        stray = Signal()
        with m.Switch(op):
            for o in Op:
                with m.Case(o):
                    m.d.comb += stray.eq((word1 & Const(((1 << INSTR_BITS) - 1) ^ USED_BITS[o], INSTR_BITS)) != 0)
            with m.Default():
                m.d.comb += stray.eq(1)
        is_mm = op == Op.MM
        bad_shape = Mux(is_mm,
                        (w.M == 0) | (w.M > cfg.rows) | (w.N == 0) | (w.N > cfg.cols) | (w.k == 0),
                        (op != Op.HALT) & ((w.len == 0) |
                                           ((op == Op.RQ) & (w.M[0:6] > MAX_SHIFT)) |
                                           ((op == Op.SM) & (w.len > cfg.sm_max_len))))

        # Stage 2: the footprint products and the bases they are added to. With a bad shape the operands
        # below may be negative; the shape error outranks the range errors, so their values do not matter.
        width = 30
        v2, addr2, stray2, shape2 = reg(name="v2"), reg(len(self.addr), name="addr2"), reg(name="stray2"), reg(name="shape2")
        a_base, a_prod, a_tail = reg(width, "a_base"), reg(width, "a_prod"), reg(width, "a_tail")
        b_base, b_prod, b_tail = reg(width, "b_base"), reg(width, "b_prod"), reg(width, "b_tail")
        c_base, c_prod, c_tail = reg(width, "c_base"), reg(width, "c_prod"), reg(width, "c_tail")
        ext_base, ext_tail = reg(width, "ext_base"), reg(width, "ext_tail")
        m.d.sync += [v2.eq(v1), addr2.eq(addr1), stray2.eq(stray), shape2.eq(bad_shape)]
        k1, m1, n1, ln1 = w.k - 1, w.M - 1, w.N - 1, w.len - 1
        zero = [x.eq(0) for x in (a_base, a_prod, a_tail, b_base, b_prod, b_tail, c_base, c_prod, c_tail,
                                  ext_base, ext_tail)]
        m.d.sync += zero
        # Each scratchpad range is base + prod + tail; LD/ST add one external range.
        with m.If(is_mm):
            m.d.sync += [a_base.eq(w.src), a_prod.eq(m1 * w.lda), a_tail.eq(k1),
                         b_base.eq(w.len), b_prod.eq(Mux(w.tb, n1, k1) * w.ldb), b_tail.eq(Mux(w.tb, k1, n1)),
                         c_base.eq(w.dst), c_prod.eq(m1 * w.ldc), c_tail.eq(n1)]
        with m.Elif(op == Op.LD):
            m.d.sync += [a_base.eq(w.dst), a_tail.eq(ln1), ext_base.eq(w.src), ext_tail.eq(ln1)]
        with m.Elif(op == Op.ST):
            m.d.sync += [a_base.eq(w.src), a_tail.eq(ln1), ext_base.eq(w.dst), ext_tail.eq(ln1)]
        with m.Elif(op.matches(Op.RQ, Op.SM)):
            m.d.sync += [a_base.eq(w.src), a_tail.eq(ln1), b_base.eq(w.dst), b_tail.eq(ln1)]

        # Stage 3 (combinational into the error memory's write port): compare and rank.
        sp_out = ((a_base + a_prod + a_tail >= cfg.sp_words) | (b_base + b_prod + b_tail >= cfg.sp_words) |
                  (c_base + c_prod + c_tail >= cfg.sp_words))
        ext_out = ext_base + ext_tail >= cfg.ext_words
        m.d.comb += [
            self.err_we.eq(v2), self.err_addr.eq(addr2),
            self.err.eq(Mux(stray2, Err.ILLEGAL, Mux(shape2, Err.SHAPE,
                        Mux(sp_out, Err.SP_RANGE, Mux(ext_out, Err.EXT_RANGE, Err.NONE))))),
            self.busy.eq(v1 | v2),
        ]
        return m
