"""The instruction checker's first two stages: the word as written, then its verdicts and range operands."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.isa import INSTR_BITS, LEN_LIMITED, MAX_SHIFTS, Feature, Op, enabled, unit_ops, units_of, used_bits

from .check_payloads import RESET_LESS, operands_layout, pipeline_reg, word_layout
from ..dma import word_stores
from ..ports import InstrLayout, ext_address, optional_field
from ..valid_chain import ValidChain

__all__ = ["CheckOperands"]


class CheckOperands(wiring.Component):
    """Stage 1 registers the host's write; stage 2 registers whether the word has stray bits (ILLEGAL) or a bad
    shape (SHAPE, docs/ISA.md), an RQ's two distances between source and destination (for OVERLAP), and the
    operands of each scratchpad range (``check_payloads``): its base, tail and the factors of its footprint
    product ``(M-1)*lda``, ``(K-1)*ldb`` ..., and whether it is read and/or written (``ga2_sw.cycles.accesses``).

    Parameters: the instruction memory's ``imem_words``; the largest MM the array takes, ``rows`` x ``cols``; the
    longest row the vector lane takes, ``sm_max_len``; the chip's ``features`` (a set of ``ga2_sw.isa.Feature``:
    which opcodes and optional fields are legal).

    Members
    -------
    i : In(stream.Signature(word_layout(imem_words), always_ready=True))
        The host's instruction-memory write.
    o : Out(stream.Signature(operands_layout(imem_words, features), always_ready=True))
        The word's verdicts and operands, ``latency`` cycles after its write.
    busy : Out(1)
        A word is in one of the stages.
    """

    latency = 2

    def __init__(self, *, imem_words, rows, cols, sm_max_len, features=frozenset()):
        self._imem_words, self._features = imem_words, frozenset(features)
        self._rows, self._cols, self._sm_max_len = rows, cols, sm_max_len
        super().__init__({"i": In(stream.Signature(word_layout(imem_words), always_ready=True)),
                          "o": Out(stream.Signature(operands_layout(imem_words, self._features), always_ready=True)),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        written = pipeline_reg(word_layout(self._imem_words), "written")
        operands = pipeline_reg(operands_layout(self._imem_words, self._features), "operands")
        chain = ValidChain(m, self.i.valid, reset_less=RESET_LESS)

        # the signals the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(features=self._features, written=written, operands=operands, chain=chain)
        self._stage_one(m, s)
        self._stage_two(m, s)
        return m

    def _stage_one(self, m, s):
        """Stage 1: the word as written, and what the ranges need of it."""
        # Stage 1: the word as written.
        s.chain.stage("written", s.written.eq(self.i.payload))
        word, w = s.written.word, InstrLayout(s.written.word)
        op, is_mm = w.op, w.op == Op.MM
        stray = Signal()
        with m.Switch(op):
            for o in (o for o in Op if enabled(o, s.features)):      # the others are illegal on this chip
                with m.Case(o):
                    # (an optional field's bit is stray on a chip built without it: ga2_sw.isa.used_bits)
                    m.d.comb += stray.eq((word & Const(((1 << INSTR_BITS) - 1) ^ used_bits(o, s.features), INSTR_BITS)) != 0)
            with m.Default():
                m.d.comb += stray.eq(1)
        bad_shape = Mux(is_mm,
                        (w.M == 0) | (w.M > self._rows) | (w.N == 0) | (w.N > self._cols) | (w.K == 0),
                        (op != Op.HALT) & ((w.len == 0) |
                                           Cat(*(op == o for o in LEN_LIMITED)).any() & (w.len > self._sm_max_len) |
                                           Cat(*((op == o) & (w.s > limit) for o, limit in MAX_SHIFTS.items())).any()))
        if Feature.WORD_STORES in s.features:      # an ST of whole words stores aligned words (ga2_sw.isa.check)
            bad_shape = bad_shape | word_stores.misaligned(op == Op.ST, w, st_words=True)
        s.__dict__.update(stray=stray, bad_shape=bad_shape, w=w, op=op, is_mm=is_mm)

    def _stage_two(self, m, s):
        """Stage 2: the verdicts, and the operands (zero for the ranges an opcode does not have)."""
        # Stage 2: the verdicts and the operands (zero for the ranges an opcode does not have).
        # The two distances of an RQ's ranges, each a subtractor alone in the stage; the next stage compares them
        # with len (OVERLAP, ga2_sw.isa.rq_overlaps_partly): the subtraction and the compares in one stage held
        # the decoupled chip to 82.6 MHz on a 45F.
        s.chain.stage("operands", s.operands.eq(0), s.operands.tag.addr.eq(s.written.addr),
                    s.operands.tag.stray.eq(s.stray), s.operands.tag.bad_shape.eq(s.bad_shape),
                    s.operands.tag.units.eq(Cat(*(s.op.matches(*unit_ops(name)) for name in units_of(s.features)))),
                    s.operands.is_rq.eq(s.op == Op.RQ), s.operands.dst_ahead.eq(s.w.dst - s.w.src),
                    s.operands.src_ahead.eq(s.w.src - s.w.dst))
        a, b, c = s.operands.a, s.operands.b, s.operands.c
        k1, m1, n1, ln1 = s.w.K - 1, s.w.M - 1, s.w.N - 1, s.w.len - 1

        def load(rng, base, tail, x=0, y=0):
            return [rng.base.eq(base), rng.tail.eq(tail), rng.x.eq(x), rng.y.eq(y)]
        with m.If(s.is_mm):
            m.d.sync += (load(a, s.w.A, k1, m1, s.w.lda) + load(b, s.w.B, Mux(s.w.tb, k1, n1), Mux(s.w.tb, n1, k1), s.w.ldb) +
                         load(c, s.w.dst, n1, m1, s.w.ldc))
            if Feature.ROW_B in s.features:       # B's range also spans rows 1..M-1's Bs: A's product (M-1)*lda more; with sa
                # A's range is row 0's alone, its product left out (CheckRanges)
                m.d.sync += [s.operands.rb.eq(optional_field(s.w, "rb")), s.operands.sa.eq(optional_field(s.w, "sa"))]
        with m.Elif(s.op == Op.LD):
            m.d.sync += load(a, s.w.dst, ln1) + [s.operands.ext_base.eq(ext_address(s.w, Op.LD)), s.operands.ext_tail.eq(ln1)]
        with m.Elif(s.op == Op.ST):
            words = Feature.WORD_STORES in s.features
            ext_tail = word_stores.ext_length(s.w, st_words=True) - 1 if words else ln1
            m.d.sync += load(a, s.w.src, ln1) + [s.operands.ext_base.eq(ext_address(s.w, Op.ST)), s.operands.ext_tail.eq(ext_tail)]
        with m.Elif(s.op.matches(Op.RQ, Op.SM)):
            m.d.sync += load(a, s.w.src, ln1) + load(b, s.w.dst, ln1)
        online = ()
        if Feature.ONLINE in s.features:              # ga2_sw.isa.footprints: the long-context instructions' three ranges
            online = (Op.SMC, Op.RSA, Op.NRM)
            with m.Elif(s.op == Op.SMC):          # the two digit rows, ld apart; the state M, S, alpha
                # (the scores: with ws, on a chip built with wide scores, their two planes, ld apart)
                scores = load(a, s.w.src, ln1, optional_field(s.w, "ws"), s.w.ld) \
                    if Feature.WIDE_SCORES in s.features else load(a, s.w.src, ln1)
                m.d.sync += scores + load(b, s.w.dst, ln1, 1, s.w.ld) + load(c, s.w.st, 2)
            with m.Elif(s.op == Op.RSA):          # the two product rows, ld apart; the outputs; alpha
                m.d.sync += load(a, s.w.src, ln1, 1, s.w.ld) + load(b, s.w.dst, ln1) + load(c, s.w.a, 0)
            with m.Elif(s.op == Op.NRM):
                m.d.sync += load(a, s.w.src, ln1) + load(b, s.w.dst, ln1) + load(c, s.w.st, 1)
        m.d.sync += [a.rd.eq(s.op.matches(Op.ST, Op.MM, Op.RQ, Op.SM, *online)), a.wr.eq(s.op == Op.LD),
                     b.rd.eq(s.op.matches(Op.MM, *(o for o in online if o == Op.RSA))),
                     b.wr.eq(s.op.matches(Op.RQ, Op.SM, *online)),
                     c.rd.eq(s.op.matches(*online) if online else 0),
                     c.wr.eq(s.op.matches(Op.MM, *(o for o in online if o == Op.SMC)))]
        s.chain.check(self.latency, "The checker's operand stages")

        m.d.comb += [self.o.valid.eq(s.chain.valid), self.o.payload.eq(s.operands), self.busy.eq(s.chain.busy)]
