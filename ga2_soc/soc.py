"""GA-2 in a LiteX SoC: the chip's Verilog as an ``Instance`` with its host port on CSRs and its AXI4 manager on
LiteDRAM, beside a VexRiscv CPU (docs/SOC.md).

``Ga2`` is the wrapper a LiteX SoC adds (``soc.ga2 = Ga2(config, ext_base)``); ``attach`` puts its AXI4 port on
the DRAM controller's crossbar; ``SimSoC`` is the simulated system (the SDRAM a model, the UART a stream to the
test bench). Only this package imports LiteX."""

from migen import Cat, ClockSignal, Instance, ResetSignal, Signal
from migen.genlib.io import CRG

from litex.build.generic_platform import Pins, Subsignal
from litex.build.sim import SimPlatform
from litex.gen import LiteXModule
from litex.soc.integration.soc_core import SoCCore
from litex.soc.interconnect import axi
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from litedram import modules as litedram_modules
from litedram.frontend.axi import LiteDRAMAXI2Native
from litedram.phy.model import SDRAMPHYModel, sdram_module_nphases

from amaranth.hdl import Shape
from amaranth.lib import wiring

from ga2_hdl.ports import COUNTERS
from ga2_hdl.top import GA2
from ga2_sw.isa import INSTR_BITS
from ga2_sw.packing import beat_bytes

from .payload import ROM_BYTES

__all__ = ["Ga2", "attach", "SimSoC", "GA2_OFFSET", "SDRAM_MODULE", "CPU"]

GA2_OFFSET = 0x0010_0000        # GA-2's external memory starts 1 MiB into the DRAM
SDRAM_MODULE = "MT48LC16M16"    # a 32 MiB SDR SDRAM: the ULX3S's, and a model LiteDRAM's AXI4 bridge works with
CPU = "vexriscv"
# The AXI4 channels' fields as LiteX's AXIInterface names them: GA-2's port member "araddr" is ar.addr.
_AXI_CHANNELS = ("ar", "aw", "w", "r", "b")


def _width(member):
    return Shape.cast(member.shape).width


class Ga2(LiteXModule):
    """The chip of ``config`` (Verilog module ``ga2``, added to the platform by the caller) with its host port
    behind CSRs: write an instruction's four words and its address, then ``imem_write``; ``start``; poll
    ``status`` (running, done, error, pc); read the six counters. Its AXI4 manager is ``self.axi``, its byte
    addresses offset by ``ext_base`` in the SoC's address space. The ports are read off the chip's
    ``wiring.Signature``, so every width is the chip's own."""

    def __init__(self, config, ext_base):
        ports = {"__".join(map(str, path)): member for path, member in GA2.top_signature(config).members.flatten()
                 if member.is_port}
        assert config.axi and INSTR_BITS == 128
        self.axi = axi.AXIInterface(data_width=8 * beat_bytes(config), address_width=32, id_width=1)
        imem_bits, pc_bits = _width(ports["host__imem_addr"]), _width(ports["host__pc"])
        self.imem_addr = CSRStorage(16, description="the instruction memory address imem_write writes")
        self.imem_data = [CSRStorage(32, name=f"imem_data{k}", description=f"instruction bits {32 * k + 31}:{32 * k}")
                          for k in range(INSTR_BITS // 32)]
        for k, csr in enumerate(self.imem_data):
            setattr(self, f"imem_data{k}", csr)
        self.imem_write = CSRStorage(1, description="a write of any value writes imem_data at imem_addr")
        self.start = CSRStorage(1, description="a write of any value starts the program at address 0")
        self.status = CSRStatus(fields=[
            CSRField("running", size=1, offset=0), CSRField("done", size=1, offset=1),
            CSRField("error", size=3, offset=4), CSRField("pc", size=pc_bits, offset=16)])
        for name in COUNTERS:
            setattr(self, name, CSRStatus(32, name=name, description=f"the {name} counter"))

        f = self.status.fields
        conn = {"i_clk": ClockSignal("sys"), "i_rst": ResetSignal("sys"),
                "i_host__imem_we": self.imem_write.re, "i_host__imem_addr": self.imem_addr.storage[:imem_bits],
                "i_host__imem_data": Cat(*(csr.storage for csr in self.imem_data)), "i_host__start": self.start.re,
                "o_host__running": f.running, "o_host__done": f.done, "o_host__error": f.error, "o_host__pc": f.pc,
                **{f"o_host__{name}": getattr(self, name).status for name in COUNTERS},
                "i_debug__addr": 0, "o_debug__data": Signal(32)}
        for name in (n for n in ports if n.startswith("ext__")):
            field = name[len("ext__"):]                       # araddr, rdata, ...: the channel, then the field
            channel = field[:2] if field[:2] in ("ar", "aw") else field[:1]
            assert channel in _AXI_CHANNELS, name
            rest = field[len(channel):]
            inward = ports[name].flow == wiring.In
            if rest == "addr":                      # GA-2's byte address, into the SoC's space
                addr = Signal(_width(ports[name]), name=f"ga2_{field}")
                self.comb += getattr(self.axi, channel).addr.eq(ext_base + addr)
                conn[f"o_{name}"] = addr
            else:
                conn[("i_" if inward else "o_") + name] = getattr(getattr(self.axi, channel), rest)
        self.specials += Instance("ga2", **conn)


def attach(soc, ga2, base_address):
    """GA-2's AXI4 manager straight onto a native port of the DRAM controller's crossbar of its own data width
    (bursts kept; the CPU's caches are bypassed, so the firmware flushes them around a run)."""
    port = soc.sdram.crossbar.get_port(data_width=len(ga2.axi.w.data))
    soc.ga2_bridge = LiteDRAMAXI2Native(ga2.axi, port, base_address=base_address)


_SIM_IO = [
    ("sys_clk", 0, Pins(1)),
    ("sys_rst", 0, Pins(1)),
    ("serial", 0,
        Subsignal("source_valid", Pins(1)), Subsignal("source_ready", Pins(1)), Subsignal("source_data", Pins(8)),
        Subsignal("sink_valid", Pins(1)), Subsignal("sink_ready", Pins(1)), Subsignal("sink_data", Pins(8))),
]


class SimSoC(SoCCore):
    """VexRiscv, a ROM of ``ROM_BYTES`` (the firmware and the payload table; read from ``sim_rom.init`` when
    the simulation starts), 8 KiB of SRAM, the UART as a byte stream (``serial_source_*``), LiteDRAM's
    controller on the PHY model of ``SDRAM_MODULE`` (its timings checked, its data in arrays) and GA-2."""

    def __init__(self, config, ga2_verilog, clk_hz=int(100e6)):
        platform = SimPlatform("SIM", _SIM_IO)
        self.crg = CRG(platform.request("sys_clk"), platform.request("sys_rst"))
        SoCCore.__init__(self, platform, clk_freq=clk_hz, cpu_type=CPU, cpu_variant="standard", uart_name="sim",
                         integrated_rom_size=ROM_BYTES, integrated_rom_init=[0] * (ROM_BYTES // 4),
                         integrated_sram_size=0x2000, ident="GA-2 in a LiteX SoC", ident_version=False)
        module_class = getattr(litedram_modules, SDRAM_MODULE)
        module = module_class(clk_hz, "1:{}".format(sdram_module_nphases[module_class.memtype]))
        self.sdrphy = SDRAMPHYModel(module=module, data_width=32, clk_freq=clk_hz)
        self.add_sdram("sdram", phy=self.sdrphy, module=module, l2_cache_size=8192)
        platform.add_source(str(ga2_verilog))
        main_ram = self.mem_map["main_ram"]
        self.ga2 = Ga2(config, ext_base=main_ram + GA2_OFFSET)
        attach(self, self.ga2, main_ram)
        self.add_constant("GA2_EXT_BASE", main_ram + GA2_OFFSET)
