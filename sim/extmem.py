"""An external-memory model for pysim: a RAM of beats behind a fixed-latency read pipeline."""

from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In

from ga2_hdl.ports import ext_signature
from ga2_sw.packing import held_image

__all__ = ["ExtMemoryModel"]


class ExtMemoryModel(wiring.Component):
    """``config.ext_words`` elements (``ga2_sw.packing``: 32-bit words, or bytes with ``bus_bytes`` > 1) held as
    beats of the port's width; the data of a read made in cycle t is presented in cycle t +
    ``config.ext_latency`` with ``rvalid``. Writes take effect at the end of their cycle, packed ones only in
    the byte lanes their strobes select.

    This is simulation-only behaviour (a real chip would face a DRAM controller); the Verilator and Icarus
    harnesses model the same memory.

    Members
    -------
    port : In(ExtSignature)
    """

    def __init__(self, config, init=()):
        self._config = config
        super().__init__({"port": In(ext_signature(config))})
        w = config.bus_bytes
        elements = held_image(init, config)
        elements += [0] * (config.ext_words - len(elements))
        if w == 1:
            self.mem = memory.Memory(shape=len(self.port.wdata), depth=config.ext_words, init=elements)
        else:
            beats = [sum(elements[b * w + j] << (8 * j) for j in range(w)) for b in range(config.ext_words // w)]
            self.mem = memory.Memory(shape=len(self.port.wdata), depth=config.ext_words // w, init=beats)

    def nonzero_cells(self, init):
        """(cell, value) of each memory row that image ``init`` (elements, as ``__init__`` takes them) makes
        nonzero: what a testbench sets (``ctx.set``) to load the image into a memory that is all zeros."""
        w, elements = self._config.bus_bytes, held_image(init, self._config)
        rows = {}
        for addr, value in enumerate(elements):
            if value:
                rows[addr // w] = rows.get(addr // w, 0) | value << (8 * (addr % w) if w > 1 else 0)
        return [(self.mem.data[row], value) for row, value in rows.items()]

    def elements(self, ctx):
        """The memory's elements now (in a testbench)."""
        w = self._config.bus_bytes
        if w == 1:
            return [ctx.get(self.mem.data[i]) for i in range(self._config.ext_words)]
        return [(ctx.get(self.mem.data[a // w]) >> (8 * (a % w))) & 0xFF for a in range(self._config.ext_words)]

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = self.mem
        w = self._config.bus_bytes
        rd = mem.read_port()
        wr = mem.write_port(granularity=8 if w > 1 else None)
        m.d.comb += [rd.addr.eq(self.port.addr), rd.en.eq(self.port.re),
                     wr.addr.eq(self.port.addr), wr.data.eq(self.port.wdata)]
        m.d.comb += wr.en.eq(self.port.wstrb & self.port.we.replicate(w) if w > 1 else self.port.we)
        # The read port adds one cycle; the remaining latency is a shift register of (valid, data).
        valid, data = Signal(name="lat_valid_1"), rd.data
        m.d.sync += valid.eq(self.port.re)
        for stage in range(2, self._config.ext_latency + 1):
            next_valid, next_data = Signal(name=f"lat_valid_{stage}"), Signal(len(data), name=f"lat_data_{stage}")
            m.d.sync += [next_valid.eq(valid), next_data.eq(data)]
            valid, data = next_valid, next_data
        m.d.comb += [self.port.rvalid.eq(valid), self.port.rdata.eq(data)]
        return m
