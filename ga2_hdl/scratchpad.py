"""The on-chip scratchpad: one synchronous read port and registered write ports on a word-addressed memory."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In

from .ports import SpReadSignature, SpWriteSignature, sp_addr_width, WORD

__all__ = ["Scratchpad", "SP_WRITE_DELAY"]

SP_WRITE_DELAY = 1      # cycles from a unit's write request to the word being in memory


class Scratchpad(wiring.Component):
    """``config.sp_words`` words of 32 bits (maps to block RAM: one read port, one write port).

    Each of ``writers`` write requesters has a port of its own. A request is registered first and reaches the
    memory ``SP_WRITE_DELAY`` cycle later, through a one-hot AND-OR of the registered requests (at most one
    unit writes at a time in order): the requesters' result logic then ends at a register next to them
    instead of running through the merge into the block RAM (the chip's critical path at 88 MHz).

    A read and a write of the same address in the same cycle return the old word. Together with the write
    delay this fixes what an RQ whose destination overlaps its source sees (docs/ISA.md), and the reference
    machine models it the same way.

    Members
    -------
    rd : In(SpReadSignature)
    wr : In(SpWriteSignature).array(writers)
    """

    def __init__(self, config, init=(), writers=1):
        self._config = config
        self._init = list(init)
        aw = sp_addr_width(config)
        super().__init__({"rd": In(SpReadSignature(aw)), "wr": In(SpWriteSignature(aw)).array(writers)})
        self.mem = memory.Memory(shape=WORD, depth=config.sp_words, init=self._init)

    @property
    def write_requested(self):
        """High when any requester asks for a write this cycle (for checks that watch the memory)."""
        return Cat(*(w.en for w in self.wr)).any()

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = self.mem
        rd = mem.read_port()
        wr = mem.write_port()
        m.d.comb += [rd.addr.eq(self.rd.addr), rd.en.eq(self.rd.en), self.rd.data.eq(rd.data)]
        en_q, addr_q, data_q = [], [], []
        for n, port in enumerate(self.wr):
            en, addr, data = (Signal(name=f"wr{n}_en"), Signal.like(port.addr, name=f"wr{n}_addr"),
                              Signal.like(port.data, name=f"wr{n}_data"))
            m.d.sync += [en.eq(port.en), addr.eq(port.addr), data.eq(port.data)]
            en_q.append(en)
            addr_q.append(addr)
            data_q.append(data)
        m.d.comb += [
            wr.en.eq(Cat(*en_q).any()),
            wr.addr.eq(_and_or(zip(en_q, addr_q))),
            wr.data.eq(_and_or(zip(en_q, data_q))),
        ]
        return m


def _and_or(requests):
    """OR of each value gated by its enable: a one-hot multiplexer without a priority chain."""
    terms = [value & en.replicate(len(value)) for en, value in requests]
    out = terms[0]
    for t in terms[1:]:
        out = out | t
    return out
