"""The softmax unit's front end: the max pass and the exp pass over the int8 scores."""

from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ga2_sw.numerics import EXP_TABLE

from ..ports import SpReadSignature
from ..valid_chain import ValidChain

__all__ = ["SoftmaxFront", "ExpLayout", "EXP_WIDTH", "exp_index", "exp_layout"]

# Q16 exponentials: EXP_TABLE[0] = 65536 needs 17 bits.
EXP_WIDTH = bits_for(max(EXP_TABLE))


def exp_layout(lanes):
    """What the front end hands the back end a cycle: one exp, and whether it is the vector's last; with two
    lanes (``Config.sm_lanes``) also the next element's exp (``exp1``) and whether there is one (``has1``: not
    past the end of a vector of odd length)."""
    if lanes == 1:
        return data.StructLayout({"exp": EXP_WIDTH, "last": 1})
    return data.StructLayout({"exp": EXP_WIDTH, "exp1": EXP_WIDTH, "has1": 1, "last": 1})


ExpLayout = exp_layout(1)


def exp_index(mx, x):
    """ROM address of ``EXP[mx - x]``: 0 .. 255 because ``mx`` is the maximum of the int8 scores."""
    return (mx - x)[:8]


class SoftmaxFront(wiring.Component):
    """Reads the ``n = last_index + 1`` scores at ``src`` twice and streams out ``EXP[max - x]`` of each.

    With ``start`` in cycle 0 (``src`` and ``last_index`` valid from cycle 1):

    * max pass: ``src+i`` is read in cycle ``1+i``; its score is registered in cycle ``2+i`` and updates the
      running maximum in cycle ``3+i``.
    * exp pass: ``src+i`` is read again in cycle ``n+1+i``; in cycle ``n+3+i`` ``max - x`` addresses the exp ROM
      (``EXP_TABLE``), whose entry is on ``o`` in cycle ``n+4+i``, ``latency`` cycles after its read.
      The first read of this pass overlaps the arrival of the max pass's last score, which is harmless: the
      maximum is final at the end of cycle ``n+2`` and only used from cycle ``n+3``.

    Each score is registered as it leaves the scratchpad (one cycle after its read), so neither the max
    compare nor the exp ROM's address sits behind the block RAM's clock-to-output: that path (RAM ->
    subtract -> ROM address) limited the chip to 72 MHz on ECP5. Only the low 8 bits of a source word are
    the score (docs/ISA.md, int8 operand).

    With two lanes (``Config.sm_lanes`` = 2) both passes read two scores a cycle, ``src+2p`` and ``src+2p+1``
    (the second lane idle in a vector of odd length's last cycle), so everything above holds with ``n`` replaced
    by the ``P = ceil(n / 2)`` pairs: the maximum takes the larger of each pair, two exp ROM ports look the
    pair's exps up, and ``o`` carries both (``exp_layout``).

    Parameters
    ----------
    max_len : int
        The longest vector (``Config.sm_max_len``).
    lanes : int
        Scores read a cycle, 1 or 2 (``Config.sm_lanes``).
    read_latency : int
        Cycles from a scratchpad read request to its data (``ga2_sw.timing.vector_read_latency``).
    addr_width : int
        Bits of a scratchpad address.

    Members
    -------
    start : In(1)
        Starts the two passes (the unit's start pulse).
    idle : In(1)
        The unit is idle: the front end follows ``src`` and holds its passes at their beginning. So ``start``,
        the end of the sequencer's issue decision, drives only ``reading`` (as the reset of the read counters
        it was a 10.76 ns path on a 25F seed).
    src : In
        The scores' address, valid in the idle cycles, of which the start cycle is the last (the front end
        keeps it).
    last_index : In
        ``len - 1``, held from the cycle after ``start``.
    sp_rd : Out(SpReadSignature), or an array of two with two lanes
        Scratchpad read port (1-cycle latency; 3 decoupled, where every cycle above from the score register on
        comes two later).
    o : Out(stream.Signature(exp_layout(lanes), always_ready=True))
        The exps of the exp pass, in order; ``last`` marks the vector's last.
    """

    def __init__(self, *, max_len, lanes, read_latency, addr_width):
        self._max_len, self._lanes, self._read_latency = max_len, lanes, read_latency
        # Registered stages from a score's read request to its exp: the scratchpad read (decoupled, with the
        # banked scratchpad's request register before it and its data and select registers after), the score
        # register, the exp ROM.
        self.latency = self._read_latency + 2
        aw = addr_width
        read_port = Out(SpReadSignature(aw)) if self._lanes == 1 else Out(SpReadSignature(aw)).array(self._lanes)
        super().__init__({"start": In(1), "idle": In(1), "src": In(aw), "last_index": In(range(self._max_len)),
                          "sp_rd": read_port,
                          "o": Out(stream.Signature(exp_layout(self._lanes), always_ready=True))})

    @property
    def read_ports(self):
        return [self.sp_rd] if self._lanes == 1 else list(self.sp_rd)

    def elaborate(self, platform):
        m = Module()
        lanes = self._lanes
        m.submodules.exp_rom = exp_rom = memory.Memory(shape=EXP_WIDTH, depth=len(EXP_TABLE), init=EXP_TABLE)
        rom_rd = exp_rom.read_port()
        rd0 = self.read_ports[0]

        # the signals the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(lanes=lanes, exp_rom=exp_rom, rom_rd=rom_rd, rd0=rd0)
        self._source_reads(m, s)
        self._passes(m, s)
        return m

    def _source_reads(self, m, s):
        """The source reads, cycles 1 .. 2n: the max pass, then the exp pass back to back (pairs with two lanes)."""
        # -- source reads: cycles 1 .. 2n, the max pass then the exp pass back to back (pairs with two lanes) --
        reading = Signal(name="reading")
        second_pass = Signal(name="second_pass")
        rd_index = Signal(range(self._max_len), name="rd_index")
        last_read = self.last_index if s.lanes == 1 else self.last_index >> 1      # the last pair's index
        rd_last = rd_index == last_read
        # The address and the enable go into the scratchpad straight from registers (an adder in front of the
        # read port was on the in-order chip's critical path).
        src_base = Signal.like(self.src, name="src_base")
        rd_addr = Signal.like(self.src, name="rd_addr")
        m.d.comb += [s.rd0.en.eq(reading), s.rd0.addr.eq(rd_addr)]
        with m.If(reading):
            m.d.sync += [rd_index.eq(Mux(rd_last, 0, rd_index + 1)),
                         rd_addr.eq(Mux(rd_last, src_base, rd_addr + s.lanes))]
            with m.If(rd_last):
                m.d.sync += second_pass.eq(1)
                with m.If(second_pass):
                    m.d.sync += reading.eq(0)
        read_has1 = None
        if s.lanes == 2:
            # The second lane reads src+2p+1, from registers of its own, except in the last pair of an odd n.
            src_base1, rd_addr1 = Signal.like(self.src, name="src_base1"), Signal.like(self.src, name="rd_addr1")
            read_has1 = reading & ~(rd_last & ~self.last_index[0])
            m.d.comb += [self.sp_rd[1].en.eq(read_has1), self.sp_rd[1].addr.eq(rd_addr1)]
            with m.If(reading):
                m.d.sync += rd_addr1.eq(Mux(rd_last, src_base1, rd_addr1 + 2))
            with m.If(self.idle):
                m.d.sync += [src_base1.eq(self.src + 1), rd_addr1.eq(self.src + 1)]
        s.__dict__.update(reading=reading, second_pass=second_pass, rd_index=rd_index, rd_last=rd_last,
                          src_base=src_base, rd_addr=rd_addr, read_has1=read_has1)

    def _passes(self, m, s):
        """The exp pass's valid bits, one per stage, the max pass's and the last score's beside them; the running
        maximum, the exp ROM's reads and the outputs to the back; idle, the passes wait at their beginning."""
        # -- the exp pass's valid bits, one per stage; the max pass's and the last score's ride beside them --
        arrive_max, arrive_last = Signal(name="arrive_max"), Signal(name="arrive_last")
        max_valid, exp_last, rom_last = Signal(name="max_valid"), Signal(name="exp_last"), Signal(name="rom_last")
        score = Signal(signed(8), name="score")
        score_max = Signal(signed(8), name="score_max")
        chain = ValidChain(m, s.reading & s.second_pass)
        read_max, read_last = s.reading & ~s.second_pass, s.reading & s.second_pass & s.rd_last
        # With two lanes the second score's presence rides beside them too.
        has1 = [s.read_has1]
        for n in range(self._read_latency - 1):     # the banked scratchpad's request, data, select registers
            req_max, req_last = Signal(name=f"request{n}_max"), Signal(name=f"request{n}_last")
            extra = []
            if s.lanes == 2:
                has1.append(Signal(name=f"request{n}_has1"))
                extra = [has1[-1].eq(has1[-2])]
            chain.stage(f"request{n}", req_max.eq(read_max), req_last.eq(read_last), *extra)
            read_max, read_last = req_max, req_last
        if s.lanes == 1:
            chain.stage("arrive", arrive_max.eq(read_max), arrive_last.eq(read_last))
            chain.stage("exp", max_valid.eq(arrive_max), exp_last.eq(arrive_last),
                        score.eq(self.sp_rd.data[:8].as_signed()))
            # Max pass: cycles 3 .. n+2. Exp pass: ROM address in cycles n+3 .. 2n+2, ROM data in n+4 .. 2n+3.
            with m.If(max_valid & (score > score_max)):
                m.d.sync += score_max.eq(score)
            m.d.comb += s.rom_rd.addr.eq(exp_index(score_max, score))
            chain.stage("rom", rom_last.eq(exp_last))
        else:
            rom_rd1 = s.exp_rom.read_port()
            arrive_has1, exp_has1, rom_has1 = (Signal(name=f"{stage}_has1") for stage in ("arrive", "exp", "rom"))
            score1 = Signal(signed(8), name="score1")
            chain.stage("arrive", arrive_max.eq(read_max), arrive_last.eq(read_last), arrive_has1.eq(has1[-1]))
            chain.stage("exp", max_valid.eq(arrive_max), exp_last.eq(arrive_last), exp_has1.eq(arrive_has1),
                        score.eq(self.sp_rd[0].data[:8].as_signed()), score1.eq(self.sp_rd[1].data[:8].as_signed()))
            # The running maximum against both scores of the pair at once (the second only where it has one),
            # and the pair's own order beside: one compare deep to the maximum's enable, not the pair's larger
            # score selected first and then compared (14.9 ns on the fast chip).
            above0 = score > score_max
            above1 = exp_has1 & (score1 > score_max)
            second = exp_has1 & (score1 > score)
            with m.If(max_valid & (above0 | above1)):
                m.d.sync += score_max.eq(Mux(above1 & (second | ~above0), score1, score))
            m.d.comb += [s.rom_rd.addr.eq(exp_index(score_max, score)), rom_rd1.addr.eq(exp_index(score_max, score1))]
            chain.stage("rom", rom_last.eq(exp_last), rom_has1.eq(exp_has1))
            m.d.comb += [self.o.payload.exp1.eq(rom_rd1.data), self.o.payload.has1.eq(rom_has1)]
        chain.check(self.latency, "The softmax front end")
        m.d.comb += [self.o.valid.eq(chain.valid), self.o.payload.exp.eq(s.rom_rd.data),
                     self.o.payload.last.eq(rom_last)]

        # Idle (nothing above runs then), the passes wait at their beginning for the start.
        with m.If(self.idle):
            m.d.sync += [s.second_pass.eq(0), s.rd_index.eq(0), score_max.eq(-128),
                         s.src_base.eq(self.src), s.rd_addr.eq(self.src)]
        with m.If(self.start):
            m.d.sync += s.reading.eq(1)
