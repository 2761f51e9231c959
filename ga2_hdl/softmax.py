"""The softmax unit: executes ``SM dst src len`` (docs/ISA.md), int8 scores to Q16 probabilities."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import memory
from amaranth.utils import bits_for

from ga2_sw.numerics import EXP_TABLE, Q16_ONE

from .divider import Divider
from .ports import Unit

__all__ = ["Softmax", "exp_index", "rounded_numerator"]

# Q16 exponentials: EXP_TABLE[0] = 65536 needs 17 bits.
EXP_WIDTH = bits_for(max(EXP_TABLE))
# A probability is at most 65536, so the quotient needs 17 bits; the divider spends one pipeline stage per
# quotient bit, which is where the 17 of X = 3*len + 21 comes from (ga2_sw.cycles.DIVIDER_LATENCY).
QUOT_WIDTH = 17


def exp_index(mx, x):
    """ROM address of ``EXP[mx - x]``: 0 .. 255 because ``mx`` is the maximum of the int8 scores."""
    return (mx - x)[:8]


def rounded_numerator(e, total):
    """``e * 65536 + total // 2``: dividing it by ``total`` rounds ``e * 65536 / total`` to nearest."""
    return (e << 16) + (total >> 1)


class Softmax(Unit):
    """Executes SM: ``sp[dst .. dst+len) = softmax_q16(s8(sp[src .. src+len)))``, bit-exact with
    ``ga2_sw.numerics.softmax_q16``; probabilities (0 .. 65536) are written zero-extended.

    Three passes over the ``len`` scores (``n`` below), with the start pulse in cycle 0:

    * max: ``src+i`` is read in cycle ``1+i``; its score is registered in cycle ``2+i`` and updates the
      running maximum in cycle ``3+i``.
    * exp/sum: ``src+i`` is read again in cycle ``n+1+i``; in cycle ``n+3+i`` ``max - x`` addresses the exp ROM
      (``EXP_TABLE``), whose entry in cycle ``n+4+i`` is stored in ``buffer[i]`` and added to the sum ``S``.
      The first read of this pass overlaps the arrival of the max pass's last score, which is harmless: the
      maximum is final at the end of cycle ``n+2`` and only used from cycle ``n+3``.
    * divide: ``buffer[i]`` is read in cycle ``2n+4+i`` and enters the 17-stage divider in cycle ``2n+5+i``
      as ``(e*65536 + S//2) // S``; the quotient is written to ``dst+i`` in cycle ``2n+22+i``.

    ``busy`` is high in cycles ``1 .. 3n+21`` (X = ``3*len + 21``), ``done`` in cycle ``3n+21`` only. The source
    is read only in the first two passes (the exps are kept in the buffer), so ``dst`` may overlap ``src``.
    Requires ``1 <= len <= config.sm_max_len``, which the sequencer checks.

    Members
    -------
    start : In(1)
        One-cycle pulse; ``instr`` is valid in the same cycle.
    instr : In(InstrLayout)
        The decoded SM instruction (``dst``, ``src``, ``len``).
    busy : Out(1)
        High for the ``3*len + 21`` cycles after ``start``.
    done : Out(1)
        High in the last busy cycle only.
    sp_rd : Out(SpReadSignature)
        Scratchpad read port (1-cycle latency).
    sp_wr : Out(SpWriteSignature)
        Scratchpad write port.
    """

    def __init__(self, config):
        # S = sum of at most sm_max_len exps, each <= 65536.
        self._sum_width = bits_for(config.sm_max_len * Q16_ONE)
        self._num_width = bits_for(max(EXP_TABLE) * Q16_ONE + (config.sm_max_len * Q16_ONE) // 2)
        super().__init__(config)

    def elaborate(self, platform):
        m = Module()
        instr = self.ctl.instr
        max_len = self._config.sm_max_len

        m.submodules.exp_rom = exp_rom = memory.Memory(shape=EXP_WIDTH, depth=len(EXP_TABLE),
                                                       init=EXP_TABLE)
        m.submodules.exp_buffer = exp_buffer = memory.Memory(shape=EXP_WIDTH, depth=max_len, init=[])
        m.submodules.divider = divider = Divider(num_width=self._num_width, den_width=self._sum_width,
                                                 quot_width=QUOT_WIDTH)
        rom_rd = exp_rom.read_port()
        buf_rd = exp_buffer.read_port()
        buf_wr = exp_buffer.write_port()

        # Fields latched at start: the sequencer only holds instr valid in the start cycle.
        dst = Signal.like(instr.dst, name="dst")
        src = Signal.like(instr.src, name="src")
        last_index = Signal(range(max_len), name="last_index")      # len - 1

        busy = Signal(name="busy_r")
        score_max = Signal(signed(8), name="score_max")
        total = Signal(self._sum_width, name="total")

        # -- source reads: cycles 1 .. 2n, the max pass then the exp pass back to back --------------------
        reading = Signal(name="reading")
        second_pass = Signal(name="second_pass")
        rd_index = Signal(range(max_len), name="rd_index")
        rd_last = rd_index == last_index
        m.d.comb += [
            self.sp_rd.en.eq(reading),
            self.sp_rd.addr.eq(src + rd_index),
        ]
        with m.If(reading):
            m.d.sync += rd_index.eq(Mux(rd_last, 0, rd_index + 1))
            with m.If(rd_last):
                m.d.sync += second_pass.eq(1)
                with m.If(second_pass):
                    m.d.sync += reading.eq(0)

        # Each score is registered as it leaves the scratchpad (one cycle after its read), so neither the
        # max compare nor the exp ROM's address sits behind the block RAM's clock-to-output: that path
        # (RAM -> subtract -> ROM address) limited the chip to 72 MHz on ECP5. The valid bits follow the
        # scores: they are high in the cycle the registered score is usable, two cycles after its read.
        arrive_max, arrive_exp, arrive_last = Signal(), Signal(), Signal()
        max_valid = Signal(name="max_valid")
        exp_valid = Signal(name="exp_valid")
        exp_last = Signal(name="exp_last")
        m.d.sync += [
            arrive_max.eq(reading & ~second_pass),
            arrive_exp.eq(reading & second_pass),
            arrive_last.eq(reading & second_pass & rd_last),
            max_valid.eq(arrive_max), exp_valid.eq(arrive_exp), exp_last.eq(arrive_last),
        ]
        # Only the low 8 bits of a source word are the score (docs/ISA.md, int8 operand).
        score = Signal(signed(8), name="score")
        m.d.sync += score.eq(self.sp_rd.data[:8].as_signed())

        # -- max pass: cycles 3 .. n+2 -----------------------------------------------------------------------
        with m.If(max_valid & (score > score_max)):
            m.d.sync += score_max.eq(score)

        # -- exp/sum pass: ROM address in cycles n+3 .. 2n+2, ROM data in n+4 .. 2n+3 -----------------------
        rom_valid = Signal(name="rom_valid")
        rom_last = Signal(name="rom_last")
        m.d.comb += rom_rd.addr.eq(exp_index(score_max, score))
        m.d.sync += [
            rom_valid.eq(exp_valid),
            rom_last.eq(exp_last),
        ]

        # buffer_index walks the buffer twice: written in the exp pass, read in the divide pass. The two never
        # overlap (the first buffer read is the cycle after the last buffer write).
        buffer_index = Signal(range(max_len), name="buffer_index")
        m.d.comb += [
            buf_wr.en.eq(rom_valid),
            buf_wr.addr.eq(buffer_index),
            buf_wr.data.eq(rom_rd.data),
        ]
        dividing = Signal(name="dividing")
        with m.If(rom_valid):
            m.d.sync += [
                total.eq(total + rom_rd.data),
                buffer_index.eq(Mux(rom_last, 0, buffer_index + 1)),
            ]
            with m.If(rom_last):
                m.d.sync += dividing.eq(1)

        # -- divide pass: buffer reads in cycles 2n+4 .. 3n+3, divider inputs in 2n+5 .. 3n+4 ----------------
        m.d.comb += [
            buf_rd.en.eq(dividing),
            buf_rd.addr.eq(buffer_index),
        ]
        with m.If(dividing):
            m.d.sync += buffer_index.eq(buffer_index + 1)
            with m.If(buffer_index == last_index):
                m.d.sync += dividing.eq(0)
        buffer_valid = Signal(name="buffer_valid")
        m.d.sync += buffer_valid.eq(dividing)
        m.d.comb += [
            divider.valid_i.eq(buffer_valid),
            divider.num.eq(rounded_numerator(buf_rd.data, total)),
            divider.den.eq(total),
        ]

        # -- writes: quotients leave the divider in cycles 2n+22 .. 3n+21 ------------------------------------
        wr_index = Signal(range(max_len), name="wr_index")
        wr_last = wr_index == last_index
        m.d.comb += [
            self.sp_wr.en.eq(divider.valid_o),
            self.sp_wr.addr.eq(dst + wr_index),
            self.sp_wr.data.eq(divider.quot),
            self.ctl.busy.eq(busy),
            self.ctl.done.eq(busy & divider.valid_o & wr_last),
        ]
        with m.If(divider.valid_o):
            m.d.sync += wr_index.eq(wr_index + 1)

        # -- start and finish ----------------------------------------------------------------------------
        # Placed last so that, in the start cycle, these assignments win over the pass logic above.
        with m.If(self.ctl.start):
            m.d.sync += [
                dst.eq(instr.dst),
                src.eq(instr.src),
                last_index.eq(instr.len - 1),
                busy.eq(1),
                reading.eq(1),
                second_pass.eq(0),
                rd_index.eq(0),
                score_max.eq(-128),
                total.eq(0),
                buffer_index.eq(0),
                dividing.eq(0),
                wr_index.eq(0),
            ]
        with m.Elif(self.ctl.done):
            m.d.sync += busy.eq(0)

        return m
