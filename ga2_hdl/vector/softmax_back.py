"""The softmax unit's back end: buffers the exps and their sum, then divides each by the sum."""

from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ga2_sw.numerics import EXP_TABLE, Q16_ONE
from ga2_sw.timing import DIVIDER_LATENCY

from .divider import Divider
from .softmax_front import EXP_WIDTH, exp_layout
from ..valid_chain import ValidChain

__all__ = ["SoftmaxBack", "rounded_numerator"]


def rounded_numerator(e, total):
    """``e * 65536 + total // 2``: dividing it by ``total`` rounds ``e * 65536 / total`` to nearest."""
    return (e << 16) + (total >> 1)


class SoftmaxBack(wiring.Component):
    """Normalises the exps that come in on ``i``: ``o = (e*65536 + S//2) // S`` for each, ``S`` their sum.

    The ``n = last_index + 1`` exps of a vector come in back to back; exp ``i`` is stored in ``buffer[i]``
    and added to ``S``. The cycle after the last one the divide pass reads ``buffer[i]`` (registered: the
    cycle after) into the divider (``DIVIDER_LATENCY`` stages, one per quotient bit), so exp ``i`` waits
    ``n`` cycles in the buffer and its quotient is on ``o`` ``n + latency`` cycles after it came in.
    While ``idle`` the sum and the buffer's index are held at zero.

    With two lanes (``Config.sm_lanes`` = 2) the exps come in two a cycle (``exp`` and, where ``has1``, ``exp1``):
    the even elements' exps go to one buffer and the odd ones' to another, each at the pair's index, and both are
    added to ``S``. The divide pass reads element ``i`` from its parity's buffer at ``i // 2``, one a cycle as
    with one lane, the buffer's word selected by the registered parity: an exp's quotient comes out as many
    cycles after the divide pass's start as with one lane.

    Parameters
    ----------
    max_len : int
        The longest vector (``Config.sm_max_len``): the buffer's depth and the sum's width.
    lanes : int
        Exps a cycle, 1 or 2 (``Config.sm_lanes``).

    Members
    -------
    idle : In(1)
        The unit is idle (it is, in the cycle of its start).
    last_index : In(range(sm_max_len))
        ``len - 1``, held from the cycle after ``start``.
    i : In(stream.Signature(exp_layout(lanes), always_ready=True))
        The exps, ``last`` on the vector's last (pair).
    o : Out(stream.Signature(DIVIDER_LATENCY, always_ready=True))
        The Q16 probabilities, in order.
    """

    def __init__(self, *, max_len, lanes):
        self._max_len, self._lanes = max_len, lanes
        # S = sum of at most max_len exps, each <= 65536.
        self._sum_width = bits_for(max_len * Q16_ONE)
        self._num_width = bits_for(max(EXP_TABLE) * Q16_ONE + (max_len * Q16_ONE) // 2)
        super().__init__({"idle": In(1), "last_index": In(range(self._max_len)),
                          "i": In(stream.Signature(exp_layout(self._lanes), always_ready=True)),
                          "o": Out(stream.Signature(DIVIDER_LATENCY, always_ready=True))})

    @property
    def latency(self):
        """Registered stages from a buffer read to its quotient: the buffer read, then the divider."""
        return 1 + DIVIDER_LATENCY

    def elaborate(self, platform):
        m = Module()
        # A probability is at most 65536: the quotient's DIVIDER_LATENCY bits (one per stage) must hold it.
        if bits_for(Q16_ONE) > DIVIDER_LATENCY:
            raise AssertionError(f"A Q16 probability needs {bits_for(Q16_ONE)} quotient bits, but the divider "
                                 f"of the cycle model (ga2_sw.timing) has {DIVIDER_LATENCY} stages")
        if self._lanes == 1:
            buffers = [memory.Memory(shape=EXP_WIDTH, depth=self._max_len, init=[])]
            m.submodules.exp_buffer = buffers[0]
        else:           # the even elements' exps and the odd ones'
            buffers = [memory.Memory(shape=EXP_WIDTH, depth=-(-self._max_len // 2), init=[]) for _ in range(2)]
            m.submodules.exp_buffer, m.submodules.exp_buffer1 = buffers
        m.submodules.divider = divider = Divider(num_width=self._num_width, den_width=self._sum_width,
                                                 quot_width=DIVIDER_LATENCY)
        if self._lanes == 1:
            buf_rd, buf_wr = buffers[0].read_port(), buffers[0].write_port()
            reads, writes = [buf_rd], [buf_wr]
        else:
            reads, writes = [b.read_port() for b in buffers], [b.write_port() for b in buffers]
        total = Signal(self._sum_width, name="total")
        dividing = Signal(name="dividing")
        # buffer_index walks the buffer twice: written in the exp pass (with two lanes, a pair at a time), read in
        # the divide pass (an element at a time). The two never overlap (the first buffer read is the cycle after
        # the last buffer write).
        buffer_index = Signal(range(self._max_len), name="buffer_index")
        payload = self.i.payload

        # the signals the sections share (each section adds its own for the ones after it)
        s = SimpleNamespace(divider=divider, total=total, dividing=dividing, buffer_index=buffer_index,
                            payload=payload, reads=reads, writes=writes)
        self._exp_pass(m, s)
        self._divide_pass(m, s)
        return m

    def _exp_pass(self, m, s):
        """The exp pass: each exp into the buffer (with two lanes, a pair a cycle) and into the sum."""
        # -- exp pass: each exp into the buffer and the sum -------------------------------------------------
        if self._lanes == 1:
            m.d.comb += [s.writes[0].en.eq(self.i.valid), s.writes[0].addr.eq(s.buffer_index),
                         s.writes[0].data.eq(s.payload.exp)]
            exps = s.payload.exp
        else:
            m.d.comb += [s.writes[0].en.eq(self.i.valid), s.writes[0].data.eq(s.payload.exp),
                         s.writes[1].en.eq(self.i.valid & s.payload.has1), s.writes[1].data.eq(s.payload.exp1)]
            m.d.comb += [w.addr.eq(s.buffer_index) for w in s.writes]
            exps = s.payload.exp + Mux(s.payload.has1, s.payload.exp1, 0)
        with m.If(self.i.valid):
            m.d.sync += [s.total.eq(s.total + exps),
                         s.buffer_index.eq(Mux(s.payload.last, 0, s.buffer_index + 1))]
            with m.If(s.payload.last):
                m.d.sync += s.dividing.eq(1)

    def _divide_pass(self, m, s):
        """The divide pass: the buffer read an element a cycle into the divider, its quotients out; idle, the
        passes wait at their beginning for the next vector."""
        # -- divide pass: buffer reads, then the divider ----------------------------------------------------
        if self._lanes == 1:
            m.d.comb += [s.reads[0].en.eq(s.dividing), s.reads[0].addr.eq(s.buffer_index)]
            buffered = s.reads[0].data
        else:           # element i at i // 2 of its parity's buffer, the word selected by the registered parity
            odd = Signal(name="read_odd")
            m.d.sync += odd.eq(s.buffer_index[0])
            m.d.comb += [r.en.eq(s.dividing) for r in s.reads] + [r.addr.eq(s.buffer_index >> 1) for r in s.reads]
            buffered = Mux(odd, s.reads[1].data, s.reads[0].data)
        with m.If(s.dividing):
            m.d.sync += s.buffer_index.eq(s.buffer_index + 1)
            with m.If(s.buffer_index == self.last_index):
                m.d.sync += s.dividing.eq(0)
        chain = ValidChain(m, s.dividing)
        chain.stage("buffer")
        chain.through(s.divider.valid_i, s.divider.valid_o, s.divider.latency)
        chain.check(self.latency, "The softmax back end")
        m.d.comb += [
            s.divider.num.eq(rounded_numerator(buffered, s.total)),
            s.divider.den.eq(s.total),
            self.o.valid.eq(chain.valid),
            self.o.payload.eq(s.divider.quot),
        ]

        # Idle (neither pass runs then), the passes wait at their beginning for the next vector.
        with m.If(self.idle):
            m.d.sync += [s.total.eq(0), s.buffer_index.eq(0), s.dividing.eq(0)]
