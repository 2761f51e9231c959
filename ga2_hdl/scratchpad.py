"""The on-chip scratchpad: one synchronous read port and one write port on a word-addressed memory."""

from amaranth.hdl import Module
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In

from .ports import SpReadSignature, SpWriteSignature, sp_addr_width, WORD

__all__ = ["Scratchpad"]


class Scratchpad(wiring.Component):
    """``config.sp_words`` words of 32 bits (maps to block RAM: one read port, one write port).

    A read and a write of the same address in the same cycle return the old word, which the reference
    machine's RQ model relies on (docs/ISA.md, overlapping ranges).

    Members
    -------
    rd : In(SpReadSignature)
    wr : In(SpWriteSignature)
    """

    def __init__(self, config, init=()):
        self._config = config
        self._init = list(init)
        aw = sp_addr_width(config)
        super().__init__({"rd": In(SpReadSignature(aw)), "wr": In(SpWriteSignature(aw))})
        self.mem = memory.Memory(shape=WORD, depth=config.sp_words, init=self._init)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = self.mem
        rd = mem.read_port()
        wr = mem.write_port()
        m.d.comb += [
            rd.addr.eq(self.rd.addr), rd.en.eq(self.rd.en), self.rd.data.eq(rd.data),
            wr.addr.eq(self.wr.addr), wr.en.eq(self.wr.en), wr.data.eq(self.wr.data),
        ]
        return m
