"""GA2: the whole chip. The sequencer dispatches to the DMA, the matrix unit, the requantiser and the
softmax unit, which share one scratchpad; the external memory sits outside, behind ``ext``."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped
from amaranth.utils import ceil_log2

from ga2_sw.isa import INSTR_BITS

from .dma import DMA
from .matrix_unit import MatrixUnit
from .ports import ExtSignature, ext_addr_width, sp_addr_width, WORD
from .requantiser import Requantiser
from .scratchpad import Scratchpad, _and_or
from .sequencer import Sequencer, UNITS, COUNTER_WIDTH
from .softmax import Softmax
from .stream_matrix_unit import StreamMatrixUnit

__all__ = ["GA2"]


class GA2(wiring.Component):
    """The GA-2 accelerator, built from one ``ga2_sw.config.Config``.

    Host protocol: write the program with ``imem_we``/``imem_addr``/``imem_data`` (one 128-bit instruction
    per cycle), pulse ``start``, wait for ``done``; then read ``error`` and the counters, and read the
    scratchpad through ``dbg_sp_addr``/``dbg_sp_data`` (data one cycle after the address; only while no
    program runs). The external memory is outside the chip.

    Members
    -------
    start : In(1)
    running, done : Out(1)
    error : Out(3)
    pc : Out
    cycles, mm_cycles, dma_cycles, vec_cycles, instructions : Out(32)
    imem_we : In(1); imem_addr : In; imem_data : In(128)
    dbg_sp_addr : In; dbg_sp_data : Out(32)
    ext : Out(ExtSignature)
    """

    def __init__(self, config):
        self._config = config
        seq_pc = ceil_log2(config.imem_words + 1)
        super().__init__({
            "start": In(1), "running": Out(1), "done": Out(1), "error": Out(3), "pc": Out(seq_pc),
            "cycles": Out(COUNTER_WIDTH), "mm_cycles": Out(COUNTER_WIDTH), "dma_cycles": Out(COUNTER_WIDTH),
            "vec_cycles": Out(COUNTER_WIDTH), "instructions": Out(COUNTER_WIDTH),
            "imem_we": In(1), "imem_addr": In(max(1, ceil_log2(config.imem_words))), "imem_data": In(INSTR_BITS),
            "dbg_sp_addr": In(sp_addr_width(config)), "dbg_sp_data": Out(WORD),
            "ext": Out(ExtSignature(ext_addr_width(config))),
        })
        # Built here, not in elaborate(), so that testbenches can peek at the memories.
        self.sequencer = Sequencer(config)
        if config.decoupled:
            # The DMA writes and reads through ports of its own; the matrix unit reads a whole k-slice per
            # cycle through a port per array row and column (docs/ARCHITECTURE.md).
            self.scratchpad = Scratchpad(config, writers=4, write_groups=(1, 3),
                                         extra_readers=1 + config.rows + config.cols)
            mm = StreamMatrixUnit(config)
        else:
            self.scratchpad = Scratchpad(config, writers=4)
            mm = MatrixUnit(config)
        self.units = {"dma": DMA(config), "mm": mm, "rq": Requantiser(config), "sm": Softmax(config)}

    @property
    def config(self):
        return self._config

    def elaborate(self, platform):
        m = Module()
        m.submodules.sequencer = seq = self.sequencer
        m.submodules.scratchpad = sp = self.scratchpad
        for name, unit in self.units.items():
            m.submodules[name] = unit
            m.d.comb += [unit.start.eq(getattr(seq, f"{name}_start")), unit.instr.eq(seq.instr),
                         getattr(seq, f"{name}_busy").eq(unit.busy), getattr(seq, f"{name}_done").eq(unit.done)]
        connect(m, flipped(self.ext), self.units["dma"].ext)

        for name in ("start", "running", "done", "error", "pc", "cycles", "mm_cycles", "dma_cycles",
                     "vec_cycles", "instructions", "imem_we", "imem_addr", "imem_data"):
            port, inner = getattr(self, name), getattr(seq, name)
            m.d.comb += (inner.eq(port) if name in ("start", "imem_we", "imem_addr", "imem_data") else port.eq(inner))

        # In order, at most one unit is busy, so at most one drives each scratchpad port: the read port is an
        # AND-OR of the units' requests, gated by their enables; each unit has a write port of its own, which
        # the scratchpad registers before merging. With no unit busy, the host reads. Decoupled, the shared
        # port serves only the compute lane's vector units (one runs at a time) and the host.
        idle = Signal()
        m.d.comb += idle.eq(~Cat(*(u.busy for u in self.units.values())).any())
        shared = [u for name, u in self.units.items() if not (self._config.decoupled and name in ("dma", "mm"))]
        readers = [(u.sp_rd.en, u.sp_rd.addr) for u in shared] + [(idle, self.dbg_sp_addr)]
        m.d.comb += [
            sp.rd.en.eq(Cat(*(en for en, _ in readers)).any()),
            sp.rd.addr.eq(_and_or((en, addr) for en, addr in readers)),
            self.dbg_sp_data.eq(sp.rd.data),
        ]
        for u in shared:
            m.d.comb += u.sp_rd.data.eq(sp.rd.data)
        if self._config.decoupled:
            mm = self.units["mm"]
            own = [self.units["dma"].sp_rd] + list(mm.a_rd) + list(mm.b_rd)
            for unit_port, sp_port in zip(own, sp.rdx):
                connect(m, unit_port, sp_port)
        for port, unit in zip(sp.wr, self.units.values()):
            connect(m, unit.sp_wr, port)
        return m
