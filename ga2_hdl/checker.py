"""Instruction validation at load time: the error code of every instruction-memory word, computed as the
host writes it, so that the sequencer's issue path only reads a 3-bit code."""

from amaranth.hdl import Module, Signal, Mux, Const, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ga2_sw.isa import Op, Err, USED_BITS, INSTR_BITS
from ga2_sw.numerics import MAX_SHIFT
from ga2_sw.timing import CHECK_LATENCY

from .ports import InstrLayout, access_layout, sp_addr_width

__all__ = ["InstrChecker", "CHECK_LATENCY"]




class InstrChecker(wiring.Component):
    """Validates instruction words against the configuration (docs/ISA.md, "Validation and error codes").

    The check depends only on the word and on fixed sizes, so it runs in a pipeline beside the instruction
    memory's write port: the word is registered; then the bases, tails and the factors of the footprint
    products ``(M-1)*lda``, ``(K-1)*ldb`` ...; then the products; then the extreme addresses; then these are
    compared with the memory sizes and the code is written (``err_we``), ``CHECK_LATENCY`` cycles after the host's write.
    Doing it at issue time instead put an instruction-memory read, a multiplier and two adders in series,
    which held the whole chip to about 40 MHz on ECP5.

    Members
    -------
    we, addr, word : In
        The host's instruction-memory write.
    err_we, err_addr : Out
        Write of the code into the error memory, ``CHECK_LATENCY`` cycles after the host's write.
    err : Out(3)
        ``ga2_sw.isa.Err`` code of the word.
    access : Out(access_layout(config))
        The word's scratchpad ranges and whether each is read or written (``ga2_sw.cycles.accesses``),
        valid with ``err_we`` when ``err`` is 0: the decoupled scoreboard compares them.
    busy : Out(1)
        A word is still in the pipeline.
    """

    def __init__(self, config):
        self._config = config
        aw = max(1, ceil_log2(config.imem_words))
        super().__init__({"we": In(1), "addr": In(aw), "word": In(INSTR_BITS),
                          "err_we": Out(1), "err_addr": Out(aw), "err": Out(3), "busy": Out(1),
                          "access": Out(access_layout(config))})

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
                        (w.M == 0) | (w.M > cfg.rows) | (w.N == 0) | (w.N > cfg.cols) | (w.K == 0),
                        (op != Op.HALT) & ((w.len == 0) |
                                           ((op == Op.RQ) & (w.s > MAX_SHIFT)) |
                                           ((op == Op.SM) & (w.len > cfg.sm_max_len))))

        # Stage 2: each scratchpad range is base + x*y + tail (LD/ST add one external range): register the
        # bases, tails and the factors of the footprint products. With a bad shape the operands below may be
        # negative; the shape error outranks the range errors, so their values do not matter.
        width = 30
        v2, addr2, stray2, shape2 = reg(name="v2"), reg(len(self.addr), name="addr2"), reg(name="stray2"), reg(name="shape2")
        ranges = [{"base": reg(width, f"{r}_base"), "x": reg(signed(17), f"{r}_x"), "y": reg(12, f"{r}_y"),
                   "tail": reg(signed(18), f"{r}_tail")} for r in "abc"]
        ext_base, ext_tail = reg(width, "ext_base"), reg(signed(18), "ext_tail")
        m.d.sync += [v2.eq(v1), addr2.eq(addr1), stray2.eq(stray), shape2.eq(bad_shape)]
        m.d.sync += [sig.eq(0) for r in ranges for sig in r.values()] + [ext_base.eq(0), ext_tail.eq(0)]
        k1, m1, n1, ln1 = w.K - 1, w.M - 1, w.N - 1, w.len - 1
        a, b, c = ranges

        def load(rng, base, tail, x=0, y=0):
            return [rng["base"].eq(base), rng["tail"].eq(tail), rng["x"].eq(x), rng["y"].eq(y)]
        with m.If(is_mm):
            m.d.sync += (load(a, w.A, k1, m1, w.lda) + load(b, w.B, Mux(w.tb, k1, n1), Mux(w.tb, n1, k1), w.ldb) +
                         load(c, w.dst, n1, m1, w.ldc))
        with m.Elif(op == Op.LD):
            m.d.sync += load(a, w.dst, ln1) + [ext_base.eq(w.src), ext_tail.eq(ln1)]
        with m.Elif(op == Op.ST):
            m.d.sync += load(a, w.src, ln1) + [ext_base.eq(w.dst), ext_tail.eq(ln1)]
        with m.Elif(op.matches(Op.RQ, Op.SM)):
            m.d.sync += load(a, w.src, ln1) + load(b, w.dst, ln1)

        # Which ranges are read and which written (cycles.accesses), carried along beside the arithmetic.
        flags2 = {r: (reg(name=f"{r}_rd2"), reg(name=f"{r}_wr2")) for r in "abc"}
        m.d.sync += [flags2["a"][0].eq(op.matches(Op.ST, Op.MM, Op.RQ, Op.SM)), flags2["a"][1].eq(op == Op.LD),
                     flags2["b"][0].eq(is_mm), flags2["b"][1].eq(op.matches(Op.RQ, Op.SM)),
                     flags2["c"][0].eq(0), flags2["c"][1].eq(is_mm)]

        def carry(values, stage):
            out = {r: tuple(reg(len(v), f"{r}_{n}{stage}") for n, v in zip(("rd", "wr", "lo"), vs))
                   for r, vs in values.items()}
            m.d.sync += [q.eq(v) for r in values for q, v in zip(out[r], values[r])]
            return out

        # Stage 3: the products, from registers into registers (a multiplier alone in its stage).
        v3, addr3, stray3, shape3 = reg(name="v3"), reg(len(self.addr), name="addr3"), reg(name="stray3"), reg(name="shape3")
        ends = [reg(signed(width + 2), f"{r}_start") for r in "abc"]
        prods = [reg(signed(width), f"{r}_prod") for r in "abc"]
        ext_end = reg(signed(width + 2), "ext_end")
        m.d.sync += [v3.eq(v2), addr3.eq(addr2), stray3.eq(stray2), shape3.eq(shape2),
                     ext_end.eq(ext_base + ext_tail)]
        for rng, start, prod in zip(ranges, ends, prods):
            m.d.sync += [start.eq(rng["base"] + rng["tail"]), prod.eq(rng["x"] * rng["y"])]

        carried3 = carry({r: (flags2[r][0], flags2[r][1], rng["base"]) for r, rng in zip("abc", ranges)}, 3)

        # Stage 4: the extreme addresses.
        v4, addr4, stray4, shape4 = reg(name="v4"), reg(len(self.addr), name="addr4"), reg(name="stray4"), reg(name="shape4")
        his = [reg(signed(width + 3), f"{r}_hi") for r in "abc"]
        ext_hi = reg(signed(width + 2), "ext_hi")
        m.d.sync += [v4.eq(v3), addr4.eq(addr3), stray4.eq(stray3), shape4.eq(shape3), ext_hi.eq(ext_end)]
        m.d.sync += [hi.eq(start + prod) for hi, start, prod in zip(his, ends, prods)]
        carried4 = carry(carried3, 4)
        aw = sp_addr_width(cfg)
        for r, hi in zip("abc", his):
            rd, wr, lo = carried4[r]
            out = getattr(self.access, r)
            m.d.comb += [out.rd.eq(rd), out.wr.eq(wr), out.lo.eq(lo[:aw]), out.hi.eq(hi[:aw])]

        # Stage 5 (combinational into the error memory's write port): compare with the sizes and rank.
        sp_out = 0
        for hi in his:
            sp_out = sp_out | (hi >= cfg.sp_words)
        ext_out = ext_hi >= cfg.ext_words
        m.d.comb += [
            self.err_we.eq(v4), self.err_addr.eq(addr4),
            self.err.eq(Mux(stray4, Err.ILLEGAL, Mux(shape4, Err.SHAPE,
                        Mux(sp_out, Err.SP_RANGE, Mux(ext_out, Err.EXT_RANGE, Err.NONE))))),
            self.busy.eq(v1 | v2 | v3 | v4),
        ]
        return m
