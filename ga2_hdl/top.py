"""GA2: the whole chip. The sequencer dispatches to the DMA, the matrix unit, the requantiser and the
softmax unit, which share one scratchpad; the external memory sits outside, behind ``ext``."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ga2_sw.isa import UNITS, features_of, unit_lane, units_of
from ga2_sw.banking import rq_follow_decision
from ga2_sw.packing import beat_bytes
from ga2_sw.timing import (SP_WRITE_DELAY, compute_read_latency, debug_read_latency, dma_data_at_banks,
                           dma_read_latency, online_schedule, rq_latency, sm_overhead, st_latency,
                           vector_read_latency)

from .control.checker import InstrChecker
from .control.scoreboard import Scoreboard
from .control.sequencer import Sequencer
from .dma.axi_dma import AxiDMA
from .dma.burst_plan import page_beats, plan_layout, precomputed
from .dma.dma import DMA
from .dma.packed_dma import PackedDMA
from .matrix.matrix_unit import MatrixUnit
from .memory.banked_scratchpad import BankedScratchpad
from .memory.scratchpad import Scratchpad
from .ports import (DebugSignature, HostSignature, SpReadSignature, check_config, ext_addr_width,
                    ext_beat_addr_width, ext_byte_addr_width, ext_signature, sp_addr_width)
from .valid_chain import delayed
from .vector.online_unit import OnlineUnit
from .vector.overlapped_requantiser import OverlappedRequantiser
from .vector.requantiser import Requantiser
from .vector.softmax import Softmax

__all__ = ["GA2", "UNIT_CLASSES", "unit_class", "unit_parameters", "build_unit", "scratchpad_parameters",
           "checker_parameters", "scoreboard_parameters", "build_sequencer"]

# The execution unit of each name in ga2_sw.isa.UNITS (built by build_unit).
UNIT_CLASSES = {
    "dma": DMA,
    "mm": MatrixUnit,
    "rq": Requantiser,
    "sm": Softmax,
    "osm": OnlineUnit,
}
assert set(UNIT_CLASSES) == set(UNITS)


def unit_class(name, config):
    """The class of unit ``name`` on ``config``'s chip: UNIT_CLASSES's, but an AXI4 port (``axi``) has the AXI
    DMA and a packed bare port (``bus_bytes`` > 1) the packed DMA, a scratchpad port per byte lane; a chip built with
    ``rq_overlap`` the requantiser that takes an RQ while the one before it drains."""
    if name == "dma" and config.axi:
        return AxiDMA
    if name == "rq" and config.rq_overlap:
        return OverlappedRequantiser
    return PackedDMA if name == "dma" and config.bus_bytes > 1 else UNIT_CLASSES[name]


def unit_parameters(name, config):
    """The keyword parameters unit ``name`` is built with on ``config``'s chip: what each unit takes of the
    configuration, in one place."""
    cls, aw = unit_class(name, check_config(config)), sp_addr_width(config)
    banks = config.sp_banks if config.decoupled else None
    if cls is DMA:
        return dict(sp_addr_width=aw, ext_addr_width=ext_addr_width(config), read_latency=dma_read_latency(config))
    if cls is PackedDMA:
        return dict(addr_width=aw, banks=config.sp_banks, bus_bytes=config.bus_bytes,
                    ext_addr_width=ext_beat_addr_width(config), read_latency=dma_read_latency(config),
                    ld_overlap=bool(config.ld_overlap), st_words=bool(config.st_words))
    if cls is AxiDMA:
        return dict(addr_width=aw, bus_bytes=config.bus_bytes, ext_addr_width=ext_byte_addr_width(config),
                    data_bytes=beat_bytes(config), page_beats=page_beats(config), ext_latency=config.ext_latency,
                    read_latency=dma_read_latency(config), st_latency=st_latency(config),
                    data_at_banks=dma_data_at_banks(config),
                    plan_layout=plan_layout(config) if precomputed(config) else None, st_words=bool(config.st_words))
    if cls is Requantiser:
        return dict(addr_width=aw, read_latency=vector_read_latency(config), banks=banks)
    if cls is OverlappedRequantiser:
        return dict(addr_width=aw, banks=banks, lanes=config.rq_lanes, read_latency=vector_read_latency(config),
                    latency=rq_latency(config), follow_decision=rq_follow_decision(config))
    if cls is Softmax:
        return dict(addr_width=aw, max_len=config.sm_max_len, lanes=config.sm_lanes,
                    read_latency=vector_read_latency(config), overhead=sm_overhead(config))
    if cls is MatrixUnit:
        return dict(rows=config.rows, cols=config.cols, addr_width=aw, banks=banks,
                    read_latency=compute_read_latency(config) if config.decoupled else None,
                    row_b=bool(config.row_b), row_writes=bool(config.row_writes))
    if cls is OnlineUnit:
        return dict(addr_width=aw, max_len=config.sm_max_len, read_latency=vector_read_latency(config),
                    schedule=online_schedule(config), wide=bool(config.wide_scores))
    raise AssertionError(f"no parameters for {cls.__name__}")


def scratchpad_parameters(config):
    """The keyword parameters of ``config``'s scratchpad: its words and address width, decoupled its banks."""
    sizes = dict(depth=config.sp_words, addr_width=sp_addr_width(config))
    return {**sizes, "banks": config.sp_banks} if config.decoupled else sizes


def build_unit(name, config):
    """Unit ``name`` of ``config``'s chip (``unit_class``, ``unit_parameters``)."""
    return unit_class(name, config)(**unit_parameters(name, config))


def checker_parameters(config):
    """The keyword parameters of ``config``'s instruction checker: the sizes and features a legal word is held
    to, and on a decoupled AXI4 chip the burst plan it works out for the DMA."""
    plan = (dict(bus_bytes=config.bus_bytes, plan_layout=plan_layout(config), page_beats=page_beats(config))
            if precomputed(config) else {})
    return dict(imem_words=config.imem_words, sp_words=config.sp_words, ext_words=config.ext_words,
                rows=config.rows, cols=config.cols, sm_max_len=config.sm_max_len, features=features_of(config),
                **plan)


def scoreboard_parameters(config):
    """The keyword parameters of a decoupled chip's scoreboard."""
    return dict(sp_addr_width=sp_addr_width(config), features=features_of(config),
                rq_overlap=bool(config.rq_overlap), ld_overlap=bool(config.ld_overlap))


def build_sequencer(config):
    """The sequencer of ``config``'s chip, with its checker and, decoupled, its scoreboard."""
    scoreboard = Scoreboard(**scoreboard_parameters(config)) if config.decoupled else None
    return Sequencer(checker=InstrChecker(**checker_parameters(config)), scoreboard=scoreboard)


# The units with a scratchpad port per element of a beat or cycle whose ports stay in their lane's groups: port 0
# in the lane's (shared with its other units), port n in "<lane><n>". The packed DMAs' byte lanes are port A's;
# the requantiser's and the softmax's lanes (Config.rq_lanes, sm_lanes) go first on port B with the rest of the
# vector lane (a lane runs one instruction at a time, so lane j of both shares group "vector<j>").
LANE_WIDE_UNITS = ("dma", "rq", "sm")

# The units whose ports of one instruction ask for consecutive words, lane j for lane 0's + j (the packed DMA's
# byte lanes; the result writer's row of words): from LANE_SET_LANES of them the banks take a set's rows from two
# registers instead of every lane's (BankedScratchpad's lane sets); fewer cost the banks about as much either way.
LANE_SET_LANES = 8


def lane_sets(config):
    """The banked scratchpad's lane sets of ``config``'s chip (``lane_reads``, ``lane_writes``): the packed DMA's
    lanes (its groups ``dma``, ``dma1``, ...) on a port of ``bus_bytes >= LANE_SET_LANES``, and with
    ``row_writes`` the result writer's ``cols`` write ports where ``cols >= LANE_SET_LANES``."""
    reads, writes = [], []
    if config.bus_bytes >= LANE_SET_LANES:
        dma = tuple(f"dma{j or ''}" for j in range(config.bus_bytes))
        reads.append(dma)
        writes.append(dma)
    if config.row_writes and config.cols >= LANE_SET_LANES:
        writes.append(tuple(f"mm{j}" for j in range(config.cols)))
    return {"lane_reads": reads, "lane_writes": writes}


# The host's debug reads share a lane's read port (they happen only while no program runs): in order the chip's
# only one; decoupled the DMA lane's, port A of the banks, so that the compute lanes' crossbar has no extra
# requester. Their data comes DEBUG_READ_LATENCY cycles after the address in both modes: in order a register
# after the scratchpad's one-cycle read, decoupled port A's request register; on a decoupled AXI4 chip a cycle
# later, port A's data register at the banks (ga2_sw.timing.debug_read_latency).
DEBUG_GROUP = {False: "shared", True: "dma"}


class GA2(wiring.Component):
    """The GA-2 accelerator, built from one ``ga2_sw.config.Config``.

    Host protocol (``HostSignature``): write the program, pulse ``start``, wait for ``done``; then read
    ``error``, ``pc`` and the counters, and read the scratchpad through ``debug`` (data
    ``ga2_sw.timing.debug_read_latency`` cycles after the address: two, three on a decoupled AXI4 chip; only
    while no program runs). The external memory is
    outside the chip.

    Members
    -------
    host : In(HostSignature)
    debug : In(DebugSignature)
    ext : Out(ExtSignature)
    """

    @staticmethod
    def top_signature(config):
        """The chip's ports, without building it (what a wrapper such as ga2_soc's reads its widths from)."""
        return wiring.Signature({"host": In(HostSignature(config.imem_words)), "debug": In(DebugSignature(sp_addr_width(config))),
                                 "ext": Out(ext_signature(config))})

    def __init__(self, config):
        self._config = config
        super().__init__(dict(self.top_signature(config).members))
        # Built here, not in elaborate(), so that testbenches can peek at the memories.
        self.sequencer = build_sequencer(config)
        self.units = {name: build_unit(name, config) for name in units_of(features_of(config))}
        self._debug_rd = SpReadSignature(sp_addr_width(config)).create(path=("debug_rd",))
        self._reads, self._writes = self._port_groups()
        groups = dict(reads={g: len(p) for g, p in self._reads.items()},
                      writes={g: len(p) for g, p in self._writes.items()})
        # In order, one memory with one read and one write port; decoupled, banks whose port A is the DMA lane's.
        all_groups = groups["reads"].keys() | groups["writes"].keys()
        dma_groups = tuple(sorted(g for g in all_groups if g.startswith("dma")))
        vector_groups = tuple(sorted(g for g in all_groups if g.startswith("vector")))
        self.scratchpad = (BankedScratchpad(**scratchpad_parameters(config), **groups, port_a=dma_groups,
                                            first=vector_groups, port_a_data_registered=dma_data_at_banks(config),
                                            **lane_sets(config))
                           if config.decoupled else Scratchpad(**scratchpad_parameters(config), **groups))
        if config.decoupled:        # the units wait as long for their data as the banks take
            assert all(self.scratchpad.read_latency(g) == compute_read_latency(config)
                       for g in self._reads if g not in dma_groups + vector_groups), \
                "port B's read latency (ga2_sw.timing.compute_read_latency) is the banked scratchpad's"
            assert all(self.scratchpad.read_latency(g) == vector_read_latency(config)
                       for g in vector_groups if g in self._reads), \
                "the vector lane's read latency (ga2_sw.timing) is the banked scratchpad's"
            assert all(self.scratchpad.read_latency(g) == dma_read_latency(config) for g in dma_groups), \
                "the DMA lane's read latency (ga2_sw.timing) is the banked scratchpad's"
        self._debug_extra = debug_read_latency(config) - self.scratchpad.read_latency(DEBUG_GROUP[config.decoupled])
        assert self._debug_extra >= 0, "the debug reads' latency covers the scratchpad's"

    @property
    def config(self):
        return self._config

    def _port_groups(self):
        """Which scratchpad port serves which unit port. A lane runs one instruction at a time, so the units
        of a lane share one memory port for reads and one for writes (in order, the whole chip is one lane);
        a unit with several read ports (the streaming matrix unit) has a memory port for each. The packed DMA's
        byte lanes each have a read and a write port: lane 0 in the DMA lane's groups, lane j in ``dma<j>``,
        all on port A of the banks; so have the wide requantiser's lanes (``Config.rq_lanes``), in ``vector``
        and ``vector<j>``, first on port B (LANE_WIDE_UNITS). The host's debug reads share a read port with a lane (DEBUG_GROUP; they
        happen only while no program runs, the sequencer's ``stopped``)."""
        decoupled = self._config.decoupled
        reads, writes = {DEBUG_GROUP[decoupled]: [self._debug_rd]}, {}
        for name, unit in self.units.items():
            lane = unit_lane(name) if decoupled else "shared"
            for ports, groups in ((unit.read_ports, reads), (unit.write_ports, writes)):
                if len(ports) == 1 or name in LANE_WIDE_UNITS:
                    for n, port in enumerate(ports):
                        groups.setdefault(f"{lane}{n or ''}", []).append(port)
                else:
                    groups.update({f"{name}{n}": [port] for n, port in enumerate(ports)})
        return reads, writes

    def elaborate(self, platform):
        m = Module()
        m.submodules.sequencer = seq = self.sequencer
        m.submodules.scratchpad = sp = self.scratchpad
        connect(m, flipped(self.host), seq.host)
        for name, port in zip(units_of(features_of(self._config)), seq.units):
            m.submodules[name] = unit = self.units[name]
            connect(m, port, unit.ctl)
        connect(m, flipped(self.ext), self.units["dma"].ext)
        if self._config.rq_overlap:     # the scoreboard keeps the RQ before the last in flight while it drains
            m.d.comb += seq.rq_older.eq(self.units["rq"].older)
        if self._config.ld_overlap:     # ... and the LD before the last
            m.d.comb += seq.dma_older.eq(self.units["dma"].older)
        if self._config.axi:        # HALT waits for the last write's answer on B
            m.d.comb += [seq.ext_quiet.eq(self.units["dma"].quiet), seq.dma_stall.eq(self.units["dma"].stalled)]
            if precomputed(self._config):       # the checker's burst plan of the word, with the instruction
                m.d.comb += self.units["dma"].plan.eq(seq.dma_plan)
        for group, ports in self._reads.items():
            for unit_port, sp_port in zip(ports, sp.read_group(group)):
                connect(m, unit_port, sp_port)
        for group, ports in self._writes.items():
            for unit_port, sp_port in zip(ports, sp.write_group(group)):
                connect(m, unit_port, sp_port)
        if self._config.decoupled:
            # The matrix and vector lanes share port B of the banks, and the vector lane's pipelines cannot wait:
            # the matrix unit keeps off the banks the vector lane's announced requests take
            # (ga2_sw.cycles.mm_schedule).
            m.d.comb += self.units["mm"].vector_banks_next.eq(sp.first_banks_next)
        # The debug port reads only while no program runs (the sequencer's `stopped`, a register): a unit's last
        # write reaches the scratchpad in the cycle after its last busy one, no later than the HALTED cycle that
        # sets `stopped`, and decoupled, the debug reads share that bank port. (Gated by "no unit busy or
        # draining", an OR of every unit's flags across the die ran into port A's request registers: the worst
        # path of several 25F seeds, 7.7 to 8.4 ns of routing.)
        assert SP_WRITE_DELAY == 1, "a unit's last write reaches the scratchpad one cycle after its last busy cycle"
        m.d.comb += [self._debug_rd.en.eq(seq.stopped), self._debug_rd.addr.eq(self.debug.addr)]
        # Registered up to the host protocol's latency.
        m.d.comb += self.debug.data.eq(delayed(m, self._debug_rd.data, self._debug_extra, "debug_data"))
        return m
