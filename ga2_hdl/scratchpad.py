"""The on-chip scratchpad: synchronous read ports and registered write ports on a word-addressed memory."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In

from .ports import SpReadSignature, SpWriteSignature, sp_addr_width, WORD

__all__ = ["Scratchpad", "SP_WRITE_DELAY"]

SP_WRITE_DELAY = 1      # cycles from a unit's write request to the word being in memory


class Scratchpad(wiring.Component):
    """``config.sp_words`` words of 32 bits. In order it maps to block RAM (one read port, one write port);
    decoupled it has two write ports, which block RAM does not offer (docs/SYNTH.md, "Decoupled mode").

    Each of ``writers`` write requesters has a port of its own. A request is registered first and reaches the
    memory ``SP_WRITE_DELAY`` cycle later, through a one-hot AND-OR of the registered requests of its
    group: the requesters' result logic then ends at a register next to them instead of running through the
    merge into the block RAM (the chip's critical path at 88 MHz). ``write_groups`` gives the number of
    requesters of each memory write port, in order: in order mode one port serves all four units (at most one
    writes at a time); decoupled, the DMA has a port of its own beside the compute units' (the scoreboard
    keeps their ranges apart, so the two never write one word in the same cycle).

    ``extra_readers`` adds read ports ``rdx`` beside ``rd`` (decoupled: the DMA's and the matrix unit's
    row and column ports). Yosys builds extra read ports as copies of the block RAM.

    A read and a write of the same address in the same cycle return the old word. Together with the write
    delay this fixes what an RQ whose destination overlaps its source sees (docs/ISA.md), and the reference
    machine models it the same way.

    Members
    -------
    rd : In(SpReadSignature)
    rdx : In(SpReadSignature).array(extra_readers)
    wr : In(SpWriteSignature).array(writers)
    """

    def __init__(self, config, init=(), writers=1, write_groups=None, extra_readers=0):
        self._config = config
        self._init = list(init)
        self._groups = tuple(write_groups or (writers,))
        if sum(self._groups) != writers or min(self._groups) < 1:
            raise ValueError(f"Write groups {self._groups} must be positive and add up to {writers} writers")
        aw = sp_addr_width(config)
        members = {"rd": In(SpReadSignature(aw)), "wr": In(SpWriteSignature(aw)).array(writers)}
        if extra_readers:
            members["rdx"] = In(SpReadSignature(aw)).array(extra_readers)
        super().__init__(members)
        self.mem = memory.Memory(shape=WORD, depth=config.sp_words, init=self._init)

    @property
    def write_requested(self):
        """High when any requester asks for a write this cycle (for checks that watch the memory)."""
        return Cat(*(w.en for w in self.wr)).any()

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = self.mem
        for port in [self.rd] + list(getattr(self, "rdx", [])):
            rd = mem.read_port()
            m.d.comb += [rd.addr.eq(port.addr), rd.en.eq(port.en), port.data.eq(rd.data)]
        en_q, addr_q, data_q = [], [], []
        for n, port in enumerate(self.wr):
            en, addr, data = (Signal(name=f"wr{n}_en"), Signal.like(port.addr, name=f"wr{n}_addr"),
                              Signal.like(port.data, name=f"wr{n}_data"))
            m.d.sync += [en.eq(port.en), addr.eq(port.addr), data.eq(port.data)]
            en_q.append(en)
            addr_q.append(addr)
            data_q.append(data)
        first = 0
        for size in self._groups:
            wr = mem.write_port()
            group = slice(first, first + size)
            first += size
            m.d.comb += [
                wr.en.eq(Cat(*en_q[group]).any()),
                wr.addr.eq(_and_or(zip(en_q[group], addr_q[group]))),
                wr.data.eq(_and_or(zip(en_q[group], data_q[group]))),
            ]
        return m


def _and_or(requests):
    """OR of each value gated by its enable: a one-hot multiplexer without a priority chain."""
    terms = [value & en.replicate(len(value)) for en, value in requests]
    out = terms[0]
    for t in terms[1:]:
        out = out | t
    return out
