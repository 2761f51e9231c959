"""The softmax unit: executes ``SM dst src len`` (docs/ISA.md), int8 scores to Q16 probabilities."""

from amaranth.hdl import Module, Signal
from amaranth.lib.wiring import Out, connect, flipped

from ..ports import SpReadSignature, Unit
from .softmax_back import SoftmaxBack
from .softmax_front import SoftmaxFront

__all__ = ["Softmax"]


class Softmax(Unit):
    """Executes SM: ``sp[dst .. dst+len) = softmax_q16(s8(sp[src .. src+len)))``, bit-exact with
    ``ga2_sw.numerics.softmax_q16``; probabilities (0 .. 65536) are written zero-extended.

    Three passes over the ``len`` scores (``n`` below), with the start pulse in cycle 0 and ``D`` the
    divider's latency (``DIVIDER_LATENCY``, ``ga2_sw.timing``):

    * max and exp (:class:`SoftmaxFront`): ``src+i`` is read in cycle ``1+i`` for the maximum, and again in
      cycle ``n+1+i``; ``EXP[max - x]`` of the second read comes out in cycle ``n+4+i``.
    * divide (:class:`SoftmaxBack`): the exps are buffered and summed into ``S``; ``buffer[i]`` is read in
      cycle ``2n+4+i`` and enters the ``D``-stage divider in cycle ``2n+5+i`` as ``(e*65536 + S//2) // S``.
    * the quotient is written to ``dst+i`` in cycle ``2n+5+D+i``.

    ``busy`` is high in cycles ``1 .. 3n+4+D`` (X = ``3*len + SM_OVERHEAD``), ``done`` in the last of them
    only. Decoupled, the vector lane's announce register and the banked scratchpad's request, data and select
    registers (``ga2_sw.timing``) move everything after the reads four cycles later: X = ``3*len + SM_OVERHEAD + 4``
    (``ga2_sw.timing.sm_overhead``). The source is read only in the first two passes (the exps are kept in the
    buffer), so ``dst`` may overlap ``src``. Requires ``1 <= len <= max_len``, which the sequencer checks.

    With two lanes (``Config.sm_lanes`` = 2) the max and exp passes read two scores a cycle through two read
    ports (``sp_rd`` is an array; :class:`SoftmaxFront`), so each takes ``P = ceil(n / 2)`` cycles and
    X = ``2P + len + overhead``; the divide pass and the writes stay one a cycle.

    Its members are those of every :class:`ga2_hdl.ports.Unit`.

    Parameters
    ----------
    addr_width :
        The scratchpad address's width.
    max_len :
        The longest SM (``Config.sm_max_len``): the buffer's depth.
    lanes :
        Scores read a cycle in the max and exp passes (``Config.sm_lanes``): a read port each.
    read_latency :
        Cycles from a read request to its data (``ga2_sw.timing.vector_read_latency``).
    overhead :
        The cycle model's ``X - 3 len`` (``ga2_sw.timing.sm_overhead``), which the stages must add up to.
    """

    def __init__(self, *, addr_width, max_len, lanes, read_latency, overhead):
        self._addr_width, self._max_len, self._lanes = addr_width, max_len, lanes
        self._read_latency, self._overhead = read_latency, overhead
        members = None
        if lanes > 1:               # a read port per lane (ga2_hdl.top: the vector lane's groups)
            members = {"sp_rd": Out(SpReadSignature(addr_width)).array(lanes)}
        super().__init__(addr_width=addr_width, members=members, read_port=lanes == 1)

    @property
    def read_ports(self):
        return [self.sp_rd] if self._lanes == 1 else list(self.sp_rd)

    def elaborate(self, platform):
        m = Module()
        instr = self.ctl.instr
        m.submodules.front = front = SoftmaxFront(max_len=self._max_len, lanes=self._lanes,
                                                  read_latency=self._read_latency, addr_width=self._addr_width)
        m.submodules.back = back = SoftmaxBack(max_len=self._max_len, lanes=self._lanes)
        # Exp i is read in cycle n+1+i, leaves the front end `front.latency` cycles later, waits n cycles in
        # the buffer and is written `back.latency` cycles after its buffer read: the last write, in cycle X, is
        # 3n + front.latency + back.latency.
        if front.latency + back.latency != self._overhead:
            raise AssertionError(f"The softmax's stages add up to {front.latency} + {back.latency} cycles where "
                                 f"the cycle model (ga2_sw.timing.sm_overhead) says {self._overhead}")

        # Fields loaded while idle, as the start cycle is the last idle one (the sequencer only holds instr valid
        # in the start cycle): `start` drives only `busy` and the front's `reading`.
        dst = Signal.like(instr.dst, name="dst")
        last_index = Signal(range(self._max_len), name="last_index")      # len - 1
        busy = Signal(name="busy_r")

        if self._lanes == 1:
            connect(m, unit=flipped(self.sp_rd), front=front.sp_rd)
        else:
            for n, (unit_port, front_port) in enumerate(zip(self.read_ports, front.read_ports)):
                connect(m, **{f"unit{n}": flipped(unit_port), f"front{n}": front_port})
        connect(m, front=front.o, back=back.i)
        m.d.comb += [front.start.eq(self.ctl.start), front.idle.eq(~busy), front.src.eq(instr.src),
                     front.last_index.eq(last_index), back.idle.eq(~busy), back.last_index.eq(last_index)]

        # -- writes: quotients leave the back end in cycles 2n+5+D .. 3n+4+D ---------------------------------
        wr_index = Signal.like(last_index, name="wr_index")
        wr_last = wr_index == last_index
        m.d.comb += [
            self.sp_wr.en.eq(back.o.valid),
            self.sp_wr.addr.eq(dst + wr_index),
            self.sp_wr.data.eq(back.o.payload),
            self.ctl.busy.eq(busy),
            self.ctl.done.eq(busy & back.o.valid & wr_last),
        ]
        with m.If(back.o.valid):
            m.d.sync += wr_index.eq(wr_index + 1)

        with m.If(~busy):
            m.d.sync += [dst.eq(instr.dst), last_index.eq(instr.len - 1), wr_index.eq(0)]
        with m.If(self.ctl.start):
            m.d.sync += busy.eq(1)
        with m.Elif(self.ctl.done):
            m.d.sync += busy.eq(0)
        return m
