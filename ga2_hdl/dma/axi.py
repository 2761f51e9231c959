"""The AXI4 manager port of a chip built with ``Config.axi = 1`` (docs/ARCHITECTURE.md, "The AXI4 port")."""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiSignature", "BURST_INCR"]

BURST_INCR = 0b01       # AxBURST: incrementing bursts, the only kind the DMA makes


class AxiSignature(wiring.Signature):
    """An AXI4 manager port, seen from the manager: the five channels AR, R, AW, W, B with their valid/ready
    handshakes, ``addr_width`` bits of byte address and ``data_width`` bits of data (32 to 128).

    IDs are one bit and always 0 (``arid``, ``awid``; the ``rid`` and ``bid`` that come back are ignored): one
    ID keeps the chip's reads in order and its writes in order. No lock, cache, protection, QoS, region or user
    signals (the subordinate sees their defaults)."""

    def __init__(self, addr_width, data_width):
        if data_width not in (32, 64, 128):
            raise ValueError(f"AXI data width must be 32, 64 or 128 bits, not {data_width!r}")
        self._addr_width, self._data_width = addr_width, data_width
        super().__init__({
            "arid": Out(1), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3), "arburst": Out(2),
            "arvalid": Out(1), "arready": In(1),
            "rid": In(1), "rdata": In(data_width), "rresp": In(2), "rlast": In(1), "rvalid": In(1), "rready": Out(1),
            "awid": Out(1), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3), "awburst": Out(2),
            "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1), "wvalid": Out(1),
            "wready": In(1),
            "bid": In(1), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        })

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def data_width(self):
        return self._data_width

    def __eq__(self, other):
        return (type(other) is AxiSignature and other.addr_width == self.addr_width
                and other.data_width == self.data_width)

    def __repr__(self):
        return f"AxiSignature({self._addr_width}, {self._data_width})"
