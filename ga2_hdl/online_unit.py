"""The online unit: the long-context instructions SMC, RSA and NRM (docs/ISA.md, docs/LONG_CONTEXT.md), built on
chips with ``Config.online_unit = 1``."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import memory
from amaranth.utils import bits_for

from ga2_sw.isa import Op
from ga2_sw.numerics import (ALPHA_BITS, DIGIT_BITS, EXP64_TABLE, EXP_DISTANCES, SCORE_MIN, SCORE_MAX, WEIGHT_MAX,
                             WEIGHT64_TABLE)
from ga2_sw.timing import (NRM_DEPTH, RSA_DEPTH, SMC_SCORE_DEPTH, nrm_busy, rsa_busy, smc_phases,
                           vector_read_latency)

from .ports import WORD, Unit
from .requant_pipeline import half_shift, round_half_saturate
from .valid_chain import delayed

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

    * SMC: reads ``st``, ``st+1``, then the ``n`` scores (cycles 1 .. n+2); each score's ``scale_score`` enters
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
    """

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        instr, ctl = self.ctl.instr, self.ctl
        L = vector_read_latency(cfg)
        nmax = cfg.sm_max_len
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

        # -- fields and the schedule, loaded while idle (the start cycle is the last idle one) ----------------
        op = Signal.like(instr.op, name="op")
        n = Signal(range(nmax + 1), name="n")
        dst, src, st = Signal.like(instr.dst, name="dst"), Signal.like(instr.src, name="src"), Signal(16, name="st")
        mult, shift = Signal(signed(16), name="mult"), Signal(6, name="shift")
        ld = Signal(12, name="ld")
        step, last_step = Signal(step_w, name="step"), Signal(step_w, name="last_step")
        # SMC's event cycles (smc_phases): the new maximum, the weights pass and the low digits' pass (each
        # switched on in the cycle before its first buffer read), the state's writes.
        new_max_at, weights_at = Signal(step_w), Signal(step_w)
        lows_at, state_at = Signal(step_w), Signal(step_w)
        drain_at = Signal(step_w, name="drain_at")          # RSA, NRM: the buffer's writing pass
        busy = Signal(name="busy_r")
        is_smc, is_rsa, is_nrm = op == Op.SMC, op == Op.RSA, op == Op.NRM
        length = instr.len[:len(n)]
        first_pass, smc_x = smc_phases(0, cfg)           # at n = 0; each adds multiples of n
        assert smc_x == first_pass + 6 and rsa_busy(0, cfg) == L + RSA_DEPTH + 2 and \
            nrm_busy(0, cfg) == L + NRM_DEPTH + 2, "the online unit's schedules (ga2_sw.timing)"
        with m.If(~busy):
            m.d.sync += [op.eq(instr.op), n.eq(length), dst.eq(instr.dst), src.eq(instr.src),
                         mult.eq(instr.m), shift.eq(instr.s), step.eq(1),
                         st.eq(Mux(instr.op == Op.RSA, instr.a, instr.st)), ld.eq(instr.ld),
                         # (the weights pass reads the buffer from P0 - 1: its scores are registered before
                         # the distance, so the buffer's output and the exp table's address are never on one path)
                         new_max_at.eq(length + first_pass - 3), weights_at.eq(length + first_pass - 2),
                         # (the writing passes are switched on a cycle before their first buffer read)
                         lows_at.eq(2 * length + first_pass + 2), state_at.eq(3 * length + first_pass + 4),
                         drain_at.eq(Mux(instr.op == Op.RSA, 3 * length + L + RSA_DEPTH + 1,
                                         length + L + NRM_DEPTH + 1)),
                         last_step.eq(Mux(instr.op == Op.SMC, 3 * length + smc_x,
                                          Mux(instr.op == Op.RSA, 4 * length + rsa_busy(0, cfg),
                                              2 * length + nrm_busy(0, cfg))))]
        with m.If(ctl.start):
            m.d.sync += busy.eq(1)
        with m.Elif(busy):
            m.d.sync += step.eq(step + 1)
            with m.If(ctl.done):
                m.d.sync += busy.eq(0)
        m.d.comb += [ctl.busy.eq(busy), ctl.done.eq(busy & (step == last_step))]

        # -- the reading pass: SMC st, st+1, src..; RSA a, then (src+ld+j, src+j, dst+j); NRM st+1, src.. -----
        reading = Signal(name="reading")
        reads_left = Signal(range(3 * nmax + 2), name="reads_left")
        rd_addr = Signal.like(instr.src, name="rd_addr")
        lo_ptr, hi_ptr, out_ptr = (Signal.like(instr.src, name=f"{k}_ptr") for k in ("low", "high", "out"))
        phase = Signal(2, name="rsa_phase")         # RSA: which of an element's three words is read next
        with m.If(~busy):
            m.d.sync += [rd_addr.eq(Mux(instr.op == Op.RSA, instr.a, Mux(instr.op == Op.NRM, instr.st + 1, instr.st))),
                         reads_left.eq(Mux(instr.op == Op.SMC, length + 2,
                                           Mux(instr.op == Op.RSA, 3 * length + 1, length + 1))),
                         lo_ptr.eq(instr.src + instr.ld), hi_ptr.eq(instr.src), out_ptr.eq(instr.dst), phase.eq(0)]
        with m.If(ctl.start):
            m.d.sync += reading.eq(1)
        with m.If(reading):
            m.d.sync += [reads_left.eq(reads_left - 1), reading.eq(reads_left != 1)]
            with m.If(is_rsa):
                with m.If(step == 1):
                    m.d.sync += [rd_addr.eq(lo_ptr), phase.eq(1)]
                with m.Elif(phase == 1):
                    m.d.sync += [rd_addr.eq(hi_ptr), phase.eq(2)]
                with m.Elif(phase == 2):
                    m.d.sync += [rd_addr.eq(out_ptr), phase.eq(0)]
                with m.Else():
                    m.d.sync += [rd_addr.eq(lo_ptr + 1), phase.eq(1), lo_ptr.eq(lo_ptr + 1),
                                 hi_ptr.eq(hi_ptr + 1), out_ptr.eq(out_ptr + 1)]
            with m.Elif((is_smc & (step == 2)) | (is_nrm & (step == 1))):
                m.d.sync += rd_addr.eq(src)
            with m.Else():
                m.d.sync += rd_addr.eq(rd_addr + 1)
        m.d.comb += [self.sp_rd.en.eq(reading), self.sp_rd.addr.eq(rd_addr)]

        # -- arrivals: the data of the read made L cycles before -----------------------------------------------
        arrived = delayed(m, reading, L, "arrived")
        data = self.sp_rd.data
        arrivals = Signal(range(3 * nmax + 2), name="arrivals")     # arrivals so far
        arr_phase = Signal(2, name="arrival_phase")                 # RSA: 1 low, 2 high, 0 running output
        with m.If(~busy):
            m.d.sync += [arrivals.eq(0), arr_phase.eq(0)]
        with m.Elif(arrived):
            m.d.sync += [arrivals.eq(arrivals + 1), arr_phase.eq(Mux(arr_phase == 2, 0, arr_phase + 1))]
        state_max, state_sum = Signal(signed(WORD), name="state_max"), Signal(signed(WORD), name="state_sum")
        alpha = Signal(ALPHA_BITS, name="alpha")
        low, high = Signal(signed(WORD), name="low"), Signal(signed(WORD), name="high")
        first, second = arrived & (arrivals == 0), arrived & (arrivals == 1)
        with m.If(is_smc & first):
            m.d.sync += state_max.eq(data.as_signed())
        with m.If((is_smc & second) | (is_nrm & first)):
            m.d.sync += state_sum.eq(data.as_signed())
        with m.If(is_rsa & first):
            m.d.sync += alpha.eq(data[:ALPHA_BITS])
        with m.If(is_rsa & arrived & (arrivals != 0) & (arr_phase == 1)):
            m.d.sync += low.eq(data.as_signed())
        with m.If(is_rsa & arrived & (arrivals != 0) & (arr_phase == 2)):
            m.d.sync += high.eq(data.as_signed())
        # The words that go through the multiplier: SMC's scores, RSA's running outputs, NRM's partials.
        element = arrived & Mux(is_smc, arrivals >= 2, Mux(is_rsa, (arrivals != 0) & (arr_phase == 0), arrivals >= 1))
        index = Signal(range(nmax), name="index")                   # the element's index, as it arrives
        with m.If(~busy):
            m.d.sync += index.eq(0)
        with m.Elif(element):
            m.d.sync += index.eq(index + 1)

        # -- the shared multiplier: word register, two partial products, their sum ----------------------------
        scale_sum = Signal(name="scale_sum")            # SMC: S * alpha goes through in this cycle
        word = Signal(signed(WORD), name="word")
        operand = Signal(signed(MULT_B), name="operand")
        m.d.sync += [word.eq(Mux(scale_sum, state_sum, data.as_signed())),
                     operand.eq(Mux(is_rsa | scale_sum, Cat(alpha, Const(0, 1)).as_signed(), mult))]
        part_lo, part_hi = Signal(signed(16 + MULT_B + 1), name="part_lo"), Signal(signed(16 + MULT_B), name="part_hi")
        product = Signal(signed(WORD + MULT_B), name="product")
        m.d.sync += [part_lo.eq(word[:16] * operand), part_hi.eq(word[16:].as_signed() * operand),
                     product.eq((part_hi << 16) + part_lo)]
        # The element's valid bit and index through the word, partial and product registers.
        v_word = delayed(m, element, 1, "v_word")
        i_word = delayed(m, index, 1, "i_word")
        v_prod, i_prod = delayed(m, v_word, 2, "v_product"), delayed(m, i_word, 2, "i_product")
        # RSA's 128 high + low, beside the multiplier.
        digits = delayed(m, (high << DIGIT_BITS) + low, 3, "rsa_digits")

        # -- into the buffer ------------------------------------------------------------------------------------
        # SMC: the score, shifted (round half up) and clamped to 16 bits; the chunk's maximum beside it. The
        # rounding add waits for the next stage, where it is 18 bits wide: (p + 2**(s-1)) >> s is
        # ((p << 1) >> s) + 1 >> 1, so this stage is the shifter alone (sim/formal.py, online-score).
        shifted = Signal(signed(WORD + MULT_B + 1), name="score_shifted")
        score = Signal(signed(16), name="score")
        chunk_max = Signal(signed(16), name="chunk_max")
        m.d.sync += [shifted.eq(half_shift(product, shift)), score.eq(round_half_saturate(shifted, 16))]
        v_score, i_score = delayed(m, v_prod, 2, "v_score"), delayed(m, i_prod, 2, "i_score")
        assert SMC_SCORE_DEPTH == 5, "word, partials, product, shifted, score"
        with m.If(~busy):
            m.d.sync += chunk_max.eq(SCORE_MIN)
        with m.Elif(is_smc & v_score & (score > chunk_max)):
            m.d.sync += chunk_max.eq(score)
        # RSA: ((p * alpha + 2**15) >> 16) + 128 high + low.
        rescaled = Signal(signed(WORD), name="rescaled")
        m.d.sync += rescaled.eq(((product + (1 << 15)) >> 16) + digits)
        v_rsa, i_rsa = delayed(m, v_prod, 1, "v_rescaled"), delayed(m, i_prod, 1, "i_rescaled")
        assert RSA_DEPTH == 4, "word, partials, product, rescaled"
        # NRM: N = 2 p m + S 2**s; u = N >> (s + 1); saturation; 8 restoring quotient steps.
        numerator = Signal(signed(64), name="numerator")
        u = Signal(signed(64), name="nrm_shifted")
        m.d.sync += [numerator.eq((product << 1) + (state_sum << shift)), u.eq(numerator >> (shift + 1))]
        bound = Signal(signed(WORD + 8), name="nrm_bound")          # 128 S
        m.d.sync += bound.eq(state_sum << 7)
        rem_w = WORD + 9
        rem, over, under, empty = Signal(unsigned(rem_w), name="rem0"), Signal(), Signal(), Signal()
        m.d.sync += [over.eq(u >= bound), under.eq(u < -bound), empty.eq(state_sum < 1), rem.eq((u + bound)[:rem_w])]
        quotient = Signal(QUOTIENT_BITS, name="q0")
        m.d.sync += quotient.eq(0)
        for k in reversed(range(QUOTIENT_BITS)):
            take = rem >= (state_sum.as_unsigned() << k)
            nrem, nq = Signal(unsigned(rem_w), name=f"rem{QUOTIENT_BITS - k}"), Signal(QUOTIENT_BITS, name=f"q{QUOTIENT_BITS - k}")
            m.d.sync += [nrem.eq(Mux(take, rem - (state_sum.as_unsigned() << k), rem)),
                         nq.eq(quotient | Mux(take, 1 << k, 0))]
            rem, quotient = nrem, nq
        flags = delayed(m, Cat(over, under, empty), QUOTIENT_BITS, "nrm_flags")
        out8 = Signal(signed(8), name="nrm_out")
        m.d.sync += out8.eq(Mux(flags[2], 0, Mux(flags[0], 127, Mux(flags[1], -128, quotient - 128))))
        v_nrm = delayed(m, v_prod, 3 + QUOTIENT_BITS + 1, "v_normalised")
        i_nrm = delayed(m, i_prod, 3 + QUOTIENT_BITS + 1, "i_normalised")
        assert NRM_DEPTH == 3 + 3 + QUOTIENT_BITS + 1, "word, partials, product, N, u, flags, 8 steps, int8"

        # -- SMC after the scores: the new maximum, alpha, S * alpha ----------------------------------------
        new_max = Signal(signed(WORD), name="new_max")
        far = Signal(name="far")                        # the ROM's distance is past the table: exp64 = 0
        rom_addr = Signal(range(EXP_DISTANCES), name="rom_addr")
        with m.If(is_smc & (step == new_max_at)):
            m.d.sync += new_max.eq(Mux(chunk_max > state_max, chunk_max, state_max))
        distance = Signal(signed(WORD + 2), name="distance")
        weights_rd = Signal(name="weights_rd")          # the weights pass reads the buffer (cycles P0-1 .. P0+n-2)
        x = Signal(signed(16), name="weights_x")        # the score read, registered
        m.d.sync += x.eq(buf_rd.data[:16].as_signed())
        at_x = delayed(m, weights_rd, 2, "weights_at_x")    # x holds a score of the weights pass
        m.d.comb += distance.eq(new_max - Mux(at_x, x, state_max))
        m.d.comb += [far.eq(distance >= EXP_DISTANCES), rom_addr.eq(distance[:len(rom_addr)]),
                     rom_rd.addr.eq(rom_addr), weight_rd.addr.eq(rom_addr)]
        far_d = delayed(m, far, 1, "far_d")
        exp = Mux(far_d, 0, rom_rd.data)
        with m.If(is_smc & (step == new_max_at + 2)):
            m.d.sync += alpha.eq(exp)
        m.d.comb += scale_sum.eq(is_smc & (step == new_max_at + 3))
        scaled_sum = Signal(signed(WORD + 1), name="scaled_sum")
        with m.If(is_smc & (step == new_max_at + 6)):          # S * alpha is the product then
            m.d.sync += scaled_sum.eq((product + (1 << 15)) >> 16)

        # The weights pass: buffer read in P0 - 1 + i, the score registered, the exp in P0 + i + 2, w registered,
        # written in P0 + i + 3.
        wi = Signal(range(nmax), name="weights_index")
        with m.If(is_smc & (step == weights_at)):
            m.d.sync += [weights_rd.eq(1), wi.eq(0)]
        with m.Elif(weights_rd):
            m.d.sync += [wi.eq(wi + 1), weights_rd.eq(wi + 1 != n)]
        weight = Signal(range(WEIGHT_MAX + 1), name="weight")
        m.d.sync += weight.eq(Mux(far_d, 0, weight_rd.data))
        v_weight = delayed(m, weights_rd, 4, "v_weight")
        i_weight = delayed(m, wi, 4, "i_weight")
        total = Signal(WORD, name="weight_sum")
        with m.If(~busy):
            m.d.sync += total.eq(0)
        with m.Elif(v_weight):
            m.d.sync += total.eq(total + weight)

        # -- the writing passes: from the buffer, one word per cycle ---------------------------------------------
        drain = Signal(name="drain")                    # the buffer is read for a write in the next cycle
        di = Signal(range(nmax), name="drain_index")
        drain_start = Mux(is_smc, step == lows_at, step == drain_at)
        with m.If(busy & drain_start):
            m.d.sync += [drain.eq(1), di.eq(0)]
        with m.Elif(drain):
            m.d.sync += [di.eq(di + 1), drain.eq(di + 1 != n)]
        v_drain, i_drain = delayed(m, drain, 1, "v_drain"), delayed(m, di, 1, "i_drain")

        # Buffer: written by the element pipelines and SMC's weights; read by the weights and writing passes.
        m.d.comb += [
            buf_wr.en.eq(Mux(is_smc, v_score | v_weight, Mux(is_rsa, v_rsa, v_nrm))),
            buf_wr.addr.eq(Mux(is_smc, Mux(v_weight, i_weight, i_score), Mux(is_rsa, i_rsa, i_nrm))),
            buf_wr.data.eq(Mux(is_smc, Mux(v_weight, weight, score.as_unsigned()),
                               Mux(is_rsa, rescaled, out8.as_signed()))),
            buf_rd.addr.eq(Mux(weights_rd, wi, di)),
        ]

        # The scratchpad writes: SMC's high digits (from `weight`), the drained words, then SMC's state.
        state_word = Signal(WORD, name="state_word")
        state_addr = Signal.like(st, name="state_addr")
        state_wr = Signal(name="state_wr")
        with m.If(is_smc & (step >= state_at) & (step < state_at + 3)):
            m.d.comb += [state_wr.eq(1), state_addr.eq(st + (step - state_at)[:2]),
                         state_word.eq(Mux(step == state_at, new_max,
                                           Mux(step == state_at + 1, scaled_sum + total, alpha)))]
        low_digit = buf_rd.data[:DIGIT_BITS]
        m.d.comb += [
            self.sp_wr.en.eq(busy & ((is_smc & v_weight) | v_drain | state_wr)),
            self.sp_wr.addr.eq(Mux(state_wr, state_addr,
                                   Mux(v_weight, dst + i_weight, dst + Mux(is_smc, ld, 0) + i_drain))),
            self.sp_wr.data.eq(Mux(state_wr, state_word,
                                   Mux(v_weight, weight >> DIGIT_BITS,
                                       Mux(is_smc, low_digit, buf_rd.data)))),
        ]
        assert SCORE_MAX == (1 << 15) - 1 and WEIGHT_MAX == (1 << 12) - 1 and DIGIT_BITS == 7
        return m
