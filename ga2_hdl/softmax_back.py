"""The softmax unit's back end: buffers the exps and their sum, then divides each by the sum."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ga2_sw.numerics import EXP_TABLE, Q16_ONE
from ga2_sw.timing import DIVIDER_LATENCY

from .divider import Divider
from .softmax_front import EXP_WIDTH, ExpLayout
from .valid_chain import ValidChain

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

    Members
    -------
    idle : In(1)
        The unit is idle (it is, in the cycle of its start).
    last_index : In(range(sm_max_len))
        ``len - 1``, held from the cycle after ``start``.
    i : In(stream.Signature(ExpLayout, always_ready=True))
        The exps, ``last`` on the vector's last.
    o : Out(stream.Signature(DIVIDER_LATENCY, always_ready=True))
        The Q16 probabilities, in order.
    """

    def __init__(self, config):
        self._max_len = config.sm_max_len
        # S = sum of at most sm_max_len exps, each <= 65536.
        self._sum_width = bits_for(config.sm_max_len * Q16_ONE)
        self._num_width = bits_for(max(EXP_TABLE) * Q16_ONE + (config.sm_max_len * Q16_ONE) // 2)
        super().__init__({"idle": In(1), "last_index": In(range(self._max_len)),
                          "i": In(stream.Signature(ExpLayout, always_ready=True)),
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
        m.submodules.exp_buffer = exp_buffer = memory.Memory(shape=EXP_WIDTH, depth=self._max_len, init=[])
        m.submodules.divider = divider = Divider(num_width=self._num_width, den_width=self._sum_width,
                                                 quot_width=DIVIDER_LATENCY)
        buf_rd, buf_wr = exp_buffer.read_port(), exp_buffer.write_port()
        total = Signal(self._sum_width, name="total")
        dividing = Signal(name="dividing")
        # buffer_index walks the buffer twice: written in the exp pass, read in the divide pass. The two never
        # overlap (the first buffer read is the cycle after the last buffer write).
        buffer_index = Signal(range(self._max_len), name="buffer_index")

        # -- exp pass: each exp into the buffer and the sum -------------------------------------------------
        m.d.comb += [buf_wr.en.eq(self.i.valid), buf_wr.addr.eq(buffer_index), buf_wr.data.eq(self.i.payload.exp)]
        with m.If(self.i.valid):
            m.d.sync += [total.eq(total + self.i.payload.exp),
                         buffer_index.eq(Mux(self.i.payload.last, 0, buffer_index + 1))]
            with m.If(self.i.payload.last):
                m.d.sync += dividing.eq(1)

        # -- divide pass: buffer reads, then the divider ----------------------------------------------------
        m.d.comb += [buf_rd.en.eq(dividing), buf_rd.addr.eq(buffer_index)]
        with m.If(dividing):
            m.d.sync += buffer_index.eq(buffer_index + 1)
            with m.If(buffer_index == self.last_index):
                m.d.sync += dividing.eq(0)
        chain = ValidChain(m, dividing)
        chain.stage("buffer")
        chain.through(divider.valid_i, divider.valid_o, divider.latency)
        chain.check(self.latency, "The softmax back end")
        m.d.comb += [
            divider.num.eq(rounded_numerator(buf_rd.data, total)),
            divider.den.eq(total),
            self.o.valid.eq(chain.valid),
            self.o.payload.eq(divider.quot),
        ]

        # Idle (neither pass runs then), the passes wait at their beginning for the next vector.
        with m.If(self.idle):
            m.d.sync += [total.eq(0), buffer_index.eq(0), dividing.eq(0)]
        return m
