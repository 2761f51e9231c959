"""An external-memory model for pysim: a word-addressed RAM behind a fixed-latency read pipeline."""

from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In

from ga2_hdl.ports import ExtSignature, ext_addr_width, WORD

__all__ = ["ExtMemoryModel"]


class ExtMemoryModel(wiring.Component):
    """``config.ext_words`` words; the data of a read made in cycle t is presented in cycle
    t + ``config.ext_latency`` with ``rvalid``. Writes take effect at the end of their cycle.

    This is simulation-only behaviour (a real chip would face a DRAM controller); the Verilator harness
    models the same memory in C++.

    Members
    -------
    port : In(ExtSignature)
    """

    def __init__(self, config, init=()):
        self._config = config
        super().__init__({"port": In(ExtSignature(ext_addr_width(config)))})
        self.mem = memory.Memory(shape=WORD, depth=config.ext_words, init=list(init))

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = self.mem
        rd, wr = mem.read_port(), mem.write_port()
        m.d.comb += [rd.addr.eq(self.port.addr), rd.en.eq(self.port.re),
                     wr.addr.eq(self.port.addr), wr.en.eq(self.port.we), wr.data.eq(self.port.wdata)]
        # The read port adds one cycle; the remaining latency is a shift register of (valid, data).
        valid, data = Signal(name="lat_valid_1"), rd.data
        m.d.sync += valid.eq(self.port.re)
        for stage in range(2, self._config.ext_latency + 1):
            next_valid, next_data = Signal(name=f"lat_valid_{stage}"), Signal(WORD, name=f"lat_data_{stage}")
            m.d.sync += [next_valid.eq(valid), next_data.eq(data)]
            valid, data = next_valid, next_data
        m.d.comb += [self.port.rvalid.eq(valid), self.port.rdata.eq(data)]
        return m
