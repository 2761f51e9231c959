"""The online unit: the long-context instructions SMC, RSA and NRM (docs/ISA.md, docs/LONG_CONTEXT.md), built on
chips with ``Config.online_unit = 1``."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import memory
from amaranth.utils import bits_for

from ga2_sw.isa import Op
from ga2_sw.numerics import (ALPHA_BITS, DIGIT_BITS, EXP64_TABLE, EXP_DISTANCES, SCORE_MIN, SCORE_MAX, WEIGHT_MAX,
                             WEIGHT64_TABLE)
from ga2_sw.timing import NRM_DEPTH, RSA_DEPTH, SMC_SCORE_DEPTH, smc_reads

from ..ports import WORD, Unit, optional_field
from .requant_pipeline import half_shift, round_half_saturate
from ..valid_chain import delayed

__all__ = ["OnlineUnit"]

MULT_B = 18             # the shared multiplier's second operand: m (signed 16) or alpha (0 .. 2**17 - 1)
QUOTIENT_BITS = 8       # NRM: floor(u / S) + 128 in 0 .. 255


class OnlineUnit(Unit):
    """Executes SMC, RSA and NRM, one instruction at a time, with one scratchpad access per cycle: every word an
    instruction reads is requested before its first write (so in decoupled mode no read and write of one cycle
    meet on a bank, and overlapping ranges behave as "read everything, then write"). Each reading pass feeds
    a pipeline whose results wait in a buffer of ``sm_max_len`` words; a writing pass then empties it. One
    32 x 18 multiplier (two partial products, then their sum) serves all three: SMC's ``score * m`` and
    ``S * alpha``, RSA's ``partial * alpha``, NRM's ``partial * m``. The schedules, cycle by cycle, are
    ``ga2_sw.cycles.online_requests`` (from ``ga2_sw.timing``); the busy times ``smc_busy``, ``rsa_busy``,
    ``nrm_busy``. With the start pulse in cycle 0 (``step`` counts the busy cycles from 1):

    * SMC: reads ``st``, ``st+1``, then the ``n`` scores (cycles 1 .. n+2; with ``ws``, on a chip built with
      ``wide``, each score's high word and then its low word, ``ld`` apart, in cycles 1 .. 2n+2, and ``128 high +
      low`` goes into the multiplier's word register as the low word arrives); each score's ``scale_score`` enters
      the buffer ``SMC_SCORE_DEPTH`` cycles after its data, beside the running maximum of the chunk; then the new
      maximum, alpha's exp-table read, alpha; the weights pass reads the buffer: the score registered, its
      distance to the maximum, the weights' table (``w = (e * 4095 + 2**15) >> 16`` of the exp table's ``e``,
      ``ga2_sw.numerics.WEIGHT64_TABLE``; the high digit written, ``w``
      back into the buffer, the sum accumulated), then the low digits from the buffer, then ``M'``, ``S'``,
      alpha.
    * RSA: reads alpha's word, then per element the low product, the high product and the running output; the
      rescaled sum enters the buffer ``RSA_DEPTH`` cycles after the running output's data; then the writes.
    * NRM: reads ``S``, then the running outputs; ``floor((2 p m + S 2**s) / (2 S 2**s))`` as
      ``floor(floor(N / 2**(s+1)) / S)`` with ``N = 2 p m + S 2**s``, saturated first, then 8 restoring quotient
      steps: ``NRM_DEPTH`` cycles after each output's data into the buffer; then the writes.

    Its members are those of every :class:`ga2_hdl.ports.Unit`.

    Parameters
    ----------
    addr_width :
        The scratchpad address's width.
    max_len :
        The longest instruction (``Config.sm_max_len``): the buffer's depth.
    read_latency :
        Cycles from a read request to its data (``ga2_sw.timing.vector_read_latency``).
    schedule :
        The cycle model's busy times (``ga2_sw.timing.online_schedule``), which the pipelines must take.
    wide :
        Whether SMC takes the ``ws`` flag (``Config.wide_scores``): scores of two planes.
    """

    def __init__(self, *, addr_width, max_len, read_latency, schedule, wide=False):
        self._max_len, self._read_latency, self._model = max_len, read_latency, schedule
        self._wide = bool(wide)
        super().__init__(addr_width=addr_width)

    def elaborate(self, platform):
        m = Module()
        instr, ctl = self.ctl.instr, self.ctl
        L = self._read_latency
        nmax = self._max_len
        step_w = bits_for(4 * nmax + L + NRM_DEPTH + 64)
        m.submodules.buffer = buf = memory.Memory(shape=WORD, depth=nmax, init=[])
        m.submodules.exp64 = rom = memory.Memory(shape=bits_for(max(EXP64_TABLE)), depth=EXP_DISTANCES,
                                                 init=EXP64_TABLE)
        # The weights' table beside it, read at the same address: `w = (e * 4095 + 2**15) >> 16` computed from the
        # exp table's output was the chip's worst path (the block RAM's output -> a 29-bit subtract -> `weight`:
        # 13.2 and 13.8 ns, 75.53 and 72.29 MHz on an 85F), and a second table costs one block RAM.
        m.submodules.weight64 = weight_rom = memory.Memory(shape=bits_for(WEIGHT_MAX), depth=EXP_DISTANCES,
                                                           init=WEIGHT64_TABLE)
        buf_wr, buf_rd, rom_rd, weight_rd = buf.write_port(), buf.read_port(), rom.read_port(), weight_rom.read_port()
        # the signals and ports the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(L=L, nmax=nmax, step_w=step_w, instr=instr, ctl=ctl, buf_wr=buf_wr,
                            buf_rd=buf_rd, rom_rd=rom_rd, weight_rd=weight_rd)
        self._schedule(m, s)
        self._reading_pass(m, s)
        self._arrivals(m, s)
        self._multiplier(m, s)
        self._element_stages(m, s)
        self._smc_tail(m, s)
        self._writing_passes(m, s)
        return m

    def _schedule(self, m, s):
        """The instruction's fields and its schedule (``ga2_sw.timing``), loaded while idle; ``busy``, ``step``
        and ``done``."""
        # -- fields and the schedule, loaded while idle (the start cycle is the last idle one) ----------------
        op = Signal.like(s.instr.op, name="op")
        n = Signal(range(s.nmax + 1), name="n")
        dst, src = Signal.like(s.instr.dst, name="dst"), Signal.like(s.instr.src, name="src")
        st = Signal(16, name="st")
        mult, shift = Signal(signed(16), name="mult"), Signal(6, name="shift")
        ld = Signal(12, name="ld")
        step, last_step = Signal(s.step_w, name="step"), Signal(s.step_w, name="last_step")
        # SMC's event cycles (smc_phases): the new maximum, the weights pass and the low digits' pass (each
        # switched on in the cycle before its first buffer read), the state's writes.
        new_max_at, weights_at = Signal(s.step_w), Signal(s.step_w)
        lows_at, state_at = Signal(s.step_w), Signal(s.step_w)
        drain_at = Signal(s.step_w, name="drain_at")          # RSA, NRM: the buffer's writing pass
        busy = Signal(name="busy_r")
        is_smc, is_rsa, is_nrm = op == Op.SMC, op == Op.RSA, op == Op.NRM
        length = s.instr.len[:len(n)]
        first_pass, smc_x, rsa_x, nrm_x = self._model           # at n = 0; each adds multiples of n
        assert smc_x == first_pass + 6 and rsa_x == s.L + RSA_DEPTH + 2 and nrm_x == s.L + NRM_DEPTH + 2, \
            "the online unit's schedules (ga2_sw.timing)"
        # A wide SMC (ws) reads one more word a score, so every event after its reads comes n cycles later.
        ws, later = Const(0), (lambda at: at)
        if self._wide:
            assert smc_reads(1, True) == smc_reads(1) + 1, "a wide SMC reads two words a score"
            ws = Signal(name="ws")
            wide_smc = (s.instr.op == Op.SMC) & optional_field(s.instr, "ws")
            later = lambda at: at + Mux(wide_smc, length, 0)      # noqa: E731
            with m.If(~busy):
                m.d.sync += ws.eq(wide_smc)
        with m.If(~busy):
            m.d.sync += [op.eq(s.instr.op), n.eq(length), dst.eq(s.instr.dst), src.eq(s.instr.src),
                         mult.eq(s.instr.m), shift.eq(s.instr.s), step.eq(1),
                         st.eq(Mux(s.instr.op == Op.RSA, s.instr.a, s.instr.st)), ld.eq(s.instr.ld),
                         # (the weights pass reads the buffer from P0 - 1: its scores are registered before
                         # the distance, so the buffer's output and the exp table's address are never on one path)
                         new_max_at.eq(later(length + first_pass - 3)),
                         weights_at.eq(later(length + first_pass - 2)),
                         # (the writing passes are switched on a cycle before their first buffer read)
                         lows_at.eq(later(2 * length + first_pass + 2)),
                         state_at.eq(later(3 * length + first_pass + 4)),
                         drain_at.eq(Mux(s.instr.op == Op.RSA, 3 * length + s.L + RSA_DEPTH + 1,
                                         length + s.L + NRM_DEPTH + 1)),
                         last_step.eq(Mux(s.instr.op == Op.SMC, later(3 * length + smc_x),
                                          Mux(s.instr.op == Op.RSA, 4 * length + rsa_x, 2 * length + nrm_x)))]
        with m.If(s.ctl.start):
            m.d.sync += busy.eq(1)
        with m.Elif(busy):
            m.d.sync += step.eq(step + 1)
            with m.If(s.ctl.done):
                m.d.sync += busy.eq(0)
        m.d.comb += [s.ctl.busy.eq(busy), s.ctl.done.eq(busy & (step == last_step))]
        s.__dict__.update(n=n, ld=ld, drain_at=drain_at, busy=busy, length=length, dst=dst, src=src, st=st,
                          mult=mult, shift=shift, step=step, new_max_at=new_max_at, weights_at=weights_at,
                          lows_at=lows_at, state_at=state_at, is_smc=is_smc, is_rsa=is_rsa, is_nrm=is_nrm, ws=ws,
                          later=later)

    def _reading_pass(self, m, s):
        """The reading pass, one scratchpad read a cycle: SMC st, st+1, src.. (with ws st, st+1, then (src+i,
        src+ld+i)); RSA a, then (src+ld+j, src+j, dst+j); NRM st+1, src.."""
        # -- the reading pass: SMC st, st+1, src..; RSA a, then (src+ld+j, src+j, dst+j); NRM st+1, src.. -----
        reading = Signal(name="reading")
        reads_left = Signal(range(3 * s.nmax + 2), name="reads_left")
        rd_addr = Signal.like(s.instr.src, name="rd_addr")
        lo_ptr, hi_ptr, out_ptr = (Signal.like(s.instr.src, name=f"{k}_ptr") for k in ("low", "high", "out"))
        phase = Signal(2, name="rsa_phase")         # RSA: which of an element's three words is read next
        with m.If(~s.busy):
            m.d.sync += [rd_addr.eq(Mux(s.instr.op == Op.RSA, s.instr.a,
                                        Mux(s.instr.op == Op.NRM, s.instr.st + 1, s.instr.st))),
                         reads_left.eq(Mux(s.instr.op == Op.SMC, s.later(s.length + 2),
                                           Mux(s.instr.op == Op.RSA, 3 * s.length + 1, s.length + 1))),
                         lo_ptr.eq(s.instr.src + s.instr.ld), hi_ptr.eq(s.instr.src), out_ptr.eq(s.instr.dst),
                         phase.eq(0)]
        with m.If(s.ctl.start):
            m.d.sync += reading.eq(1)
        with m.If(reading):
            m.d.sync += [reads_left.eq(reads_left - 1), reading.eq(reads_left != 1)]
            with m.If(s.is_rsa):
                with m.If(s.step == 1):
                    m.d.sync += [rd_addr.eq(lo_ptr), phase.eq(1)]
                with m.Elif(phase == 1):
                    m.d.sync += [rd_addr.eq(hi_ptr), phase.eq(2)]
                with m.Elif(phase == 2):
                    m.d.sync += [rd_addr.eq(out_ptr), phase.eq(0)]
                with m.Else():
                    m.d.sync += [rd_addr.eq(lo_ptr + 1), phase.eq(1), lo_ptr.eq(lo_ptr + 1),
                                 hi_ptr.eq(hi_ptr + 1), out_ptr.eq(out_ptr + 1)]
            if self._wide:
                with m.Elif(s.is_smc & s.ws):           # st, st+1, then each score's high word and its low word
                    with m.If(s.step == 1):
                        m.d.sync += rd_addr.eq(rd_addr + 1)
                    with m.Elif(phase == 0):
                        m.d.sync += [rd_addr.eq(hi_ptr), phase.eq(1)]
                    with m.Else():
                        m.d.sync += [rd_addr.eq(lo_ptr), phase.eq(0), hi_ptr.eq(hi_ptr + 1), lo_ptr.eq(lo_ptr + 1)]
            with m.Elif((s.is_smc & (s.step == 2)) | (s.is_nrm & (s.step == 1))):
                m.d.sync += rd_addr.eq(s.src)
            with m.Else():
                m.d.sync += rd_addr.eq(rd_addr + 1)
        m.d.comb += [self.sp_rd.en.eq(reading), self.sp_rd.addr.eq(rd_addr)]
        s.__dict__.update(reading=reading)

    def _arrivals(self, m, s):
        """The read words as they arrive, ``L`` cycles after their reads: the state's words, RSA's alpha and
        digits, and the elements that go through the multiplier (``element``, ``index``)."""
        # -- arrivals: the data of the read made L cycles before -----------------------------------------------
        arrived = delayed(m, s.reading, s.L, "arrived")
        data = self.sp_rd.data
        arrivals = Signal(range(3 * s.nmax + 2), name="arrivals")     # arrivals so far
        arr_phase = Signal(2, name="arrival_phase")                 # RSA: 1 low, 2 high, 0 running output
        with m.If(~s.busy):
            m.d.sync += [arrivals.eq(0), arr_phase.eq(0)]
        with m.Elif(arrived):
            m.d.sync += [arrivals.eq(arrivals + 1), arr_phase.eq(Mux(arr_phase == 2, 0, arr_phase + 1))]
        state_max, state_sum = Signal(signed(WORD), name="state_max"), Signal(signed(WORD), name="state_sum")
        alpha = Signal(ALPHA_BITS, name="alpha")
        low, high = Signal(signed(WORD), name="low"), Signal(signed(WORD), name="high")
        first, second = arrived & (arrivals == 0), arrived & (arrivals == 1)
        with m.If(s.is_smc & first):
            m.d.sync += state_max.eq(data.as_signed())
        with m.If((s.is_smc & second) | (s.is_nrm & first)):
            m.d.sync += state_sum.eq(data.as_signed())
        with m.If(s.is_rsa & first):
            m.d.sync += alpha.eq(data[:ALPHA_BITS])
        with m.If(s.is_rsa & arrived & (arrivals != 0) & (arr_phase == 1)):
            m.d.sync += low.eq(data.as_signed())
        with m.If(s.is_rsa & arrived & (arrivals != 0) & (arr_phase == 2)):
            m.d.sync += high.eq(data.as_signed())
        # A wide SMC's scores: the high word held until its low word arrives (odd arrivals from 3 on).
        score_high, scores_at = None, arrivals >= 2
        if self._wide:
            score_high = Signal(signed(WORD), name="score_high")
            with m.If(s.is_smc & s.ws & arrived & (arrivals >= 2) & ~arrivals[0]):
                m.d.sync += score_high.eq(data.as_signed())
            scores_at = (arrivals >= 2) & (~s.ws | arrivals[0])
        # The words that go through the multiplier: SMC's scores, RSA's running outputs, NRM's partials.
        element = arrived & Mux(s.is_smc, scores_at,
                                Mux(s.is_rsa, (arrivals != 0) & (arr_phase == 0), arrivals >= 1))
        index = Signal(range(s.nmax), name="index")                   # the element's index, as it arrives
        with m.If(~s.busy):
            m.d.sync += index.eq(0)
        with m.Elif(element):
            m.d.sync += index.eq(index + 1)
        s.__dict__.update(data=data, alpha=alpha, element=element, index=index, state_max=state_max,
                          state_sum=state_sum, low=low, high=high, score_high=score_high)

    def _multiplier(self, m, s):
        """The shared 32 x 18 multiplier: the word register, two partial products and their sum, with each
        element's valid bit and index beside them."""
        # -- the shared multiplier: word register, two partial products, their sum ----------------------------
        scale_sum = Signal(name="scale_sum")            # SMC: S * alpha goes through in this cycle
        word = Signal(signed(WORD), name="word")
        operand = Signal(signed(MULT_B), name="operand")
        score = s.data.as_signed()
        if self._wide:      # a wide SMC's score: 128 x its high word + its low word, modulo 2**32
            score = Mux(s.is_smc & s.ws, (s.score_high << DIGIT_BITS) + s.data.as_signed(), score)
        m.d.sync += [word.eq(Mux(scale_sum, s.state_sum, score)),
                     operand.eq(Mux(s.is_rsa | scale_sum, Cat(s.alpha, Const(0, 1)).as_signed(), s.mult))]
        part_lo, part_hi = Signal(signed(16 + MULT_B + 1), name="part_lo"), Signal(signed(16 + MULT_B), name="part_hi")
        product = Signal(signed(WORD + MULT_B), name="product")
        m.d.sync += [part_lo.eq(word[:16] * operand), part_hi.eq(word[16:].as_signed() * operand),
                     product.eq((part_hi << 16) + part_lo)]
        # The element's valid bit and index through the word, partial and product registers.
        v_word = delayed(m, s.element, 1, "v_word")
        i_word = delayed(m, s.index, 1, "i_word")
        v_prod, i_prod = delayed(m, v_word, 2, "v_product"), delayed(m, i_word, 2, "i_product")
        # RSA's 128 high + low, beside the multiplier.
        digits = delayed(m, (s.high << DIGIT_BITS) + s.low, 3, "rsa_digits")
        s.__dict__.update(scale_sum=scale_sum, product=product, digits=digits, v_prod=v_prod, i_prod=i_prod)

    def _element_stages(self, m, s):
        """Each instruction's stages after the product, into the buffer: SMC's scaled score and the chunk's
        maximum, RSA's rescaled sum, NRM's restoring division to int8."""
        # -- into the buffer ------------------------------------------------------------------------------------
        # SMC: the score, shifted (round half up) and clamped to 16 bits; the chunk's maximum beside it. The
        # rounding add waits for the next stage, where it is 18 bits wide: (p + 2**(s-1)) >> s is
        # ((p << 1) >> s) + 1 >> 1, so this stage is the shifter alone (sim/formal.py, online-score).
        shifted = Signal(signed(WORD + MULT_B + 1), name="score_shifted")
        score = Signal(signed(16), name="score")
        chunk_max = Signal(signed(16), name="chunk_max")
        m.d.sync += [shifted.eq(half_shift(s.product, s.shift)), score.eq(round_half_saturate(shifted, 16))]
        v_score, i_score = delayed(m, s.v_prod, 2, "v_score"), delayed(m, s.i_prod, 2, "i_score")
        assert SMC_SCORE_DEPTH == 5, "word, partials, product, shifted, score"
        with m.If(~s.busy):
            m.d.sync += chunk_max.eq(SCORE_MIN)
        with m.Elif(s.is_smc & v_score & (score > chunk_max)):
            m.d.sync += chunk_max.eq(score)
        # RSA: ((p * alpha + 2**15) >> 16) + 128 high + low.
        rescaled = Signal(signed(WORD), name="rescaled")
        m.d.sync += rescaled.eq(((s.product + (1 << 15)) >> 16) + s.digits)
        v_rsa, i_rsa = delayed(m, s.v_prod, 1, "v_rescaled"), delayed(m, s.i_prod, 1, "i_rescaled")
        assert RSA_DEPTH == 4, "word, partials, product, rescaled"
        # NRM: N = 2 p m + S 2**s; u = N >> (s + 1); saturation; 8 restoring quotient steps.
        numerator = Signal(signed(64), name="numerator")
        u = Signal(signed(64), name="nrm_shifted")
        m.d.sync += [numerator.eq((s.product << 1) + (s.state_sum << s.shift)), u.eq(numerator >> (s.shift + 1))]
        bound = Signal(signed(WORD + 8), name="nrm_bound")          # 128 S
        m.d.sync += bound.eq(s.state_sum << 7)
        rem_w = WORD + 9
        rem, over, under, empty = Signal(unsigned(rem_w), name="rem0"), Signal(), Signal(), Signal()
        m.d.sync += [over.eq(u >= bound), under.eq(u < -bound), empty.eq(s.state_sum < 1),
                     rem.eq((u + bound)[:rem_w])]
        quotient = Signal(QUOTIENT_BITS, name="q0")
        m.d.sync += quotient.eq(0)
        for k in reversed(range(QUOTIENT_BITS)):
            take = rem >= (s.state_sum.as_unsigned() << k)
            nrem, nq = Signal(unsigned(rem_w), name=f"rem{QUOTIENT_BITS - k}"), Signal(QUOTIENT_BITS, name=f"q{QUOTIENT_BITS - k}")
            m.d.sync += [nrem.eq(Mux(take, rem - (s.state_sum.as_unsigned() << k), rem)),
                         nq.eq(quotient | Mux(take, 1 << k, 0))]
            rem, quotient = nrem, nq
        flags = delayed(m, Cat(over, under, empty), QUOTIENT_BITS, "nrm_flags")
        out8 = Signal(signed(8), name="nrm_out")
        m.d.sync += out8.eq(Mux(flags[2], 0, Mux(flags[0], 127, Mux(flags[1], -128, quotient - 128))))
        v_nrm = delayed(m, s.v_prod, 3 + QUOTIENT_BITS + 1, "v_normalised")
        i_nrm = delayed(m, s.i_prod, 3 + QUOTIENT_BITS + 1, "i_normalised")
        assert NRM_DEPTH == 3 + 3 + QUOTIENT_BITS + 1, "word, partials, product, N, u, flags, 8 steps, int8"
        s.__dict__.update(score=score, chunk_max=chunk_max, rescaled=rescaled, out8=out8, v_nrm=v_nrm,
                          i_nrm=i_nrm, v_score=v_score, i_score=i_score, v_rsa=v_rsa, i_rsa=i_rsa)

    def _smc_tail(self, m, s):
        """SMC after its scores: the new maximum, alpha from the exp table, S * alpha, and the weights pass
        (the exp and weight tables read at each score's distance to the maximum, the weights summed)."""
        # -- SMC after the scores: the new maximum, alpha, S * alpha ----------------------------------------
        new_max = Signal(signed(WORD), name="new_max")
        far = Signal(name="far")                        # the ROM's distance is past the table: exp64 = 0
        rom_addr = Signal(range(EXP_DISTANCES), name="rom_addr")
        with m.If(s.is_smc & (s.step == s.new_max_at)):
            m.d.sync += new_max.eq(Mux(s.chunk_max > s.state_max, s.chunk_max, s.state_max))
        distance = Signal(signed(WORD + 2), name="distance")
        weights_rd = Signal(name="weights_rd")          # the weights pass reads the buffer (cycles P0-1 .. P0+n-2)
        x = Signal(signed(16), name="weights_x")        # the score read, registered
        m.d.sync += x.eq(s.buf_rd.data[:16].as_signed())
        at_x = delayed(m, weights_rd, 2, "weights_at_x")    # x holds a score of the weights pass
        m.d.comb += distance.eq(new_max - Mux(at_x, x, s.state_max))
        m.d.comb += [far.eq(distance >= EXP_DISTANCES), rom_addr.eq(distance[:len(rom_addr)]),
                     s.rom_rd.addr.eq(rom_addr), s.weight_rd.addr.eq(rom_addr)]
        far_d = delayed(m, far, 1, "far_d")
        exp = Mux(far_d, 0, s.rom_rd.data)
        with m.If(s.is_smc & (s.step == s.new_max_at + 2)):
            m.d.sync += s.alpha.eq(exp)
        m.d.comb += s.scale_sum.eq(s.is_smc & (s.step == s.new_max_at + 3))
        scaled_sum = Signal(signed(WORD + 1), name="scaled_sum")
        with m.If(s.is_smc & (s.step == s.new_max_at + 6)):          # S * alpha is the product then
            m.d.sync += scaled_sum.eq((s.product + (1 << 15)) >> 16)

        # The weights pass: buffer read in P0 - 1 + i, the score registered, the exp in P0 + i + 2, w registered,
        # written in P0 + i + 3.
        wi = Signal(range(s.nmax), name="weights_index")
        with m.If(s.is_smc & (s.step == s.weights_at)):
            m.d.sync += [weights_rd.eq(1), wi.eq(0)]
        with m.Elif(weights_rd):
            m.d.sync += [wi.eq(wi + 1), weights_rd.eq(wi + 1 != s.n)]
        weight = Signal(range(WEIGHT_MAX + 1), name="weight")
        m.d.sync += weight.eq(Mux(far_d, 0, s.weight_rd.data))
        v_weight = delayed(m, weights_rd, 4, "v_weight")
        i_weight = delayed(m, wi, 4, "i_weight")
        total = Signal(WORD, name="weight_sum")
        with m.If(~s.busy):
            m.d.sync += total.eq(0)
        with m.Elif(v_weight):
            m.d.sync += total.eq(total + weight)
        s.__dict__.update(new_max=new_max, weights_rd=weights_rd, scaled_sum=scaled_sum, wi=wi, weight=weight,
                          v_weight=v_weight, i_weight=i_weight, total=total)

    def _writing_passes(self, m, s):
        """The writing passes, a word a cycle from the buffer, and the scratchpad writes: SMC's high digits,
        the drained words, SMC's state."""
        # -- the writing passes: from the buffer, one word per cycle ---------------------------------------------
        drain = Signal(name="drain")                    # the buffer is read for a write in the next cycle
        di = Signal(range(s.nmax), name="drain_index")
        drain_start = Mux(s.is_smc, s.step == s.lows_at, s.step == s.drain_at)
        with m.If(s.busy & drain_start):
            m.d.sync += [drain.eq(1), di.eq(0)]
        with m.Elif(drain):
            m.d.sync += [di.eq(di + 1), drain.eq(di + 1 != s.n)]
        v_drain, i_drain = delayed(m, drain, 1, "v_drain"), delayed(m, di, 1, "i_drain")

        # Buffer: written by the element pipelines and SMC's weights; read by the weights and writing passes.
        m.d.comb += [
            s.buf_wr.en.eq(Mux(s.is_smc, s.v_score | s.v_weight, Mux(s.is_rsa, s.v_rsa, s.v_nrm))),
            s.buf_wr.addr.eq(Mux(s.is_smc, Mux(s.v_weight, s.i_weight, s.i_score), Mux(s.is_rsa, s.i_rsa, s.i_nrm))),
            s.buf_wr.data.eq(Mux(s.is_smc, Mux(s.v_weight, s.weight, s.score.as_unsigned()),
                               Mux(s.is_rsa, s.rescaled, s.out8.as_signed()))),
            s.buf_rd.addr.eq(Mux(s.weights_rd, s.wi, di)),
        ]

        # The scratchpad writes: SMC's high digits (from `weight`), the drained words, then SMC's state.
        state_word = Signal(WORD, name="state_word")
        state_addr = Signal.like(s.st, name="state_addr")
        state_wr = Signal(name="state_wr")
        with m.If(s.is_smc & (s.step >= s.state_at) & (s.step < s.state_at + 3)):
            m.d.comb += [state_wr.eq(1), state_addr.eq(s.st + (s.step - s.state_at)[:2]),
                         state_word.eq(Mux(s.step == s.state_at, s.new_max,
                                           Mux(s.step == s.state_at + 1, s.scaled_sum + s.total, s.alpha)))]
        low_digit = s.buf_rd.data[:DIGIT_BITS]
        m.d.comb += [
            self.sp_wr.en.eq(s.busy & ((s.is_smc & s.v_weight) | v_drain | state_wr)),
            self.sp_wr.addr.eq(Mux(state_wr, state_addr,
                                   Mux(s.v_weight, s.dst + s.i_weight, s.dst + Mux(s.is_smc, s.ld, 0) + i_drain))),
            self.sp_wr.data.eq(Mux(state_wr, state_word,
                                   Mux(s.v_weight, s.weight >> DIGIT_BITS,
                                       Mux(s.is_smc, low_digit, s.buf_rd.data)))),
        ]
        assert SCORE_MAX == (1 << 15) - 1 and WEIGHT_MAX == (1 << 12) - 1 and DIGIT_BITS == 7
