"""Signatures and layouts shared by the GA-2 units: the decoded instruction, the unit handshake, the host
port, the scratchpad ports and the external-memory port, and the base class of the execution units."""

from amaranth.hdl import Cat, unsigned, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ga2_sw.config import Config
from ga2_sw.packing import beat_bytes, element_bytes
from ga2_sw.isa import EXT_ADDR_BITS, FIELDS, OPTIONAL_FIELDS, SLOTS, INSTR_BITS, WIDE, Err

__all__ = ["InstrLayout", "optional_field", "ext_address", "access_layout", "UnitSignature", "HostSignature", "DebugSignature", "SpReadSignature",
           "SpWriteSignature", "ExtSignature", "ext_signature", "ext_beat_addr_width", "ext_byte_addr_width", "Unit", "check_config", "sp_addr_width", "ext_addr_width", "imem_addr_width", "address_width",
           "pc_width", "WORD", "COUNTER_WIDTH", "COUNTERS", "ERR_WIDTH"]

WORD = 32
COUNTER_WIDTH = 32
ERR_WIDTH = max(Err).bit_length()   # the error code (ga2_sw.isa.Err)
# The counters of docs/ISA.md, as the host port names them (ga2_sw.cycles.Counters, in its order): the chapter's
# five and the DMA's stall count.
COUNTERS = ("cycles", "mm_cycles", "dma_cycles", "vec_cycles", "instructions", "stall_cycles")


def _instr_layout():
    """The 128-bit instruction word of docs/ISA.md, derived from ``ga2_sw.isa.SLOTS`` and ``FIELDS``: one
    field per assembly name at its slot (so ``A`` and ``src`` overlay, as do ``B`` and ``len``, ``K`` and
    the signed ``m``, ``M`` and ``s``)."""
    fields = {"op": data.Field(unsigned(SLOTS["op"][1]), SLOTS["op"][0])}
    for names in FIELDS.values():
        for name, slot in names:
            if name in OPTIONAL_FIELDS:     # read with optional_field, on the chips built with them
                continue
            lsb, width, is_signed = SLOTS[slot]
            fields[name] = data.Field((signed if is_signed else unsigned)(width), lsb)
    for high in set(WIDE.values()):         # the high halves of the wide fields (ext_address)
        lsb, width, _ = SLOTS[high]
        fields[high] = data.Field(unsigned(width), lsb)
    return data.FlexibleLayout(INSTR_BITS, fields)


def optional_field(instr, name):
    """An optional field of ``instr`` (a view of InstrLayout; ``ga2_sw.isa.OPTIONAL_FIELDS``, MM's ``rb``), read
    from its slot. InstrLayout leaves these fields out, so that a chip built without them has the Verilog it had
    before they existed (a datasheet is tied to it: synth.datasheet.check_records)."""
    (slot,) = {slot for names in FIELDS.values() for n, slot in names if n == name}
    lsb, width, _ = SLOTS[slot]
    return instr.as_value()[lsb:lsb + width]


def ext_address(instr, op):
    """The external address of an LD or ST (``op``) in ``instr`` (a view of InstrLayout): its wide field,
    the low half in its slot and the high half in ``xhi`` (``ga2_sw.isa.WIDE``), EXT_ADDR_BITS wide."""
    (name,) = [name for (o, name) in WIDE if o == op]
    value = Cat(instr[name], instr[WIDE[op, name]])
    assert len(value) == EXT_ADDR_BITS, "docs/ISA.md: external addresses are 32 bits"
    return value


InstrLayout = _instr_layout()


def access_layout(addr_width):
    """The scratchpad ranges of an instruction for the decoupled scoreboard, as addresses of ``addr_width``
    bits: up to three inclusive ranges ``a``, ``b``, ``c`` (``ga2_sw.cycles.accesses``: LD writes a; ST reads a;
    MM reads a, b and writes c; RQ and SM read a and write b), each flagged as read and/or written; an unused
    range has neither flag."""
    aw = addr_width
    rng = data.StructLayout({"lo": unsigned(aw), "hi": unsigned(aw), "rd": unsigned(1), "wr": unsigned(1)})
    return data.StructLayout({"a": rng, "b": rng, "c": rng})


def address_width(words):
    """Bits of an address into a memory of ``words`` words (at least one)."""
    return max(1, ceil_log2(words))


def imem_addr_width(config):
    return address_width(config.imem_words)


def pc_width(imem_words):
    """The program counter reaches ``imem_words`` (one past the end: the PC_OVERFLOW fault)."""
    return ceil_log2(imem_words + 1)


def sp_addr_width(config):
    return address_width(config.sp_words)


def ext_addr_width(config):
    return max(1, ceil_log2(config.ext_words))


def ext_beat_addr_width(config):
    """Bits of a beat address: the element address's bits less the byte lane's (``ga2_sw.packing``)."""
    return max(1, ceil_log2(config.ext_words // config.bus_bytes))


class SpReadSignature(wiring.Signature):
    """A synchronous scratchpad read port, seen from the unit that reads: ``data`` is the word at the
    ``addr`` presented in the previous cycle with ``en`` high."""
    def __init__(self, addr_width):
        super().__init__({"addr": Out(addr_width), "en": Out(1), "data": In(WORD)})


class SpWriteSignature(wiring.Signature):
    """A scratchpad write port, seen from the unit that writes: ``data`` is stored at ``addr`` at the
    end of every cycle with ``en`` high."""
    def __init__(self, addr_width):
        super().__init__({"addr": Out(addr_width), "en": Out(1), "data": Out(WORD)})


class ExtSignature(wiring.Signature):
    """The external-memory port, seen from the chip. A read request (``re``) or a write (``we`` with
    ``wdata``) may be made every cycle. The data of a read made in cycle t arrives in cycle t + latency
    with ``rvalid`` high; the memory (the simulation harness) has a fixed latency and never stalls.

    With ``bus_bytes`` = 1 a beat is one 32-bit word at word address ``addr``. With W = ``bus_bytes`` > 1 a beat
    is W bytes, ``addr`` is the beat's address (element address // W), byte lane j of ``rdata``/``wdata`` is
    element ``addr * W + j``, and a write stores only the lanes whose ``wstrb`` bit is set
    (``ga2_sw.packing``)."""
    def __init__(self, addr_width, bus_bytes=1):
        self._bus_bytes = bus_bytes
        width = WORD if bus_bytes == 1 else 8 * bus_bytes
        strobe = {"wstrb": Out(bus_bytes)} if bus_bytes > 1 else {}
        super().__init__({"addr": Out(addr_width), "re": Out(1), "we": Out(1), "wdata": Out(width), **strobe,
                          "rdata": In(width), "rvalid": In(1)})

    @property
    def bus_bytes(self):
        return self._bus_bytes

    def __eq__(self, other):
        return type(other) is ExtSignature and other.members == self.members

    def __repr__(self):
        return f"ExtSignature({len(self.members['addr'].shape)}, bus_bytes={self._bus_bytes})"


def ext_signature(config):
    """The external-memory port of ``config``'s chip: the bare port of ``ExtSignature`` (a beat of ``bus_bytes``
    at a beat address), or with ``axi`` an AXI4 manager (``ga2_hdl.dma.axi``) of byte addresses."""
    if config.axi:
        from .dma.axi import AxiSignature
        return AxiSignature(ext_byte_addr_width(config), 8 * beat_bytes(config))
    return ExtSignature(ext_beat_addr_width(config), config.bus_bytes)


def ext_byte_addr_width(config):
    """Bits of an AXI byte address: every byte of the ``ext_words`` elements (``ga2_sw.packing``)."""
    return max(1, ceil_log2(config.ext_words * element_bytes(config)))


class UnitSignature(wiring.Signature):
    """The handshake between the sequencer and an execution unit, seen from the sequencer.

    ``start`` is a one-cycle pulse with ``instr`` valid in the same cycle. ``busy`` is high for exactly the
    unit's busy time X (``ga2_sw.isa.OPS``, docs/ISA.md) starting the cycle after ``start``; ``done`` is
    high in the last busy cycle only. A unit that finishes an instruction beside its next one (the decoupled
    matrix unit, whose result writer drains a tile while the next is read) is ``busy`` until it can take the
    next ``start`` and ``draining`` from the cycle after until the instruction's last write
    (``ga2_sw.cycles.mm_schedule``; likewise the requantiser of a chip built with ``rq_overlap``, which takes the
    next RQ after the last one's last read, ``OverlappedRequantiser``); the other units never drain."""

    def __init__(self):
        super().__init__({"start": Out(1), "instr": Out(InstrLayout), "busy": In(1), "done": In(1),
                          "draining": In(1)})

    def __eq__(self, other):
        return type(other) is UnitSignature

    def __repr__(self):
        return "UnitSignature()"


class HostSignature(wiring.Signature):
    """The host's port to the sequencer, seen from the host.

    Write the program with ``imem_we``/``imem_addr``/``imem_data`` (one 128-bit instruction per cycle),
    pulse ``start``, wait for ``done``; then read ``error``, ``pc`` and the counters (``COUNTERS``)."""

    def __init__(self, imem_words):
        self._imem_addr_width, self._pc_width = address_width(imem_words), pc_width(imem_words)
        super().__init__({
            "start": Out(1), "running": In(1), "done": In(1), "error": In(ERR_WIDTH), "pc": In(self._pc_width),
            **{name: In(COUNTER_WIDTH) for name in COUNTERS},
            "imem_we": Out(1), "imem_addr": Out(self._imem_addr_width), "imem_data": Out(INSTR_BITS),
        })

    @property
    def imem_addr_width(self):
        return self._imem_addr_width

    @property
    def pc_width(self):
        return self._pc_width

    def __eq__(self, other):
        return (type(other) is HostSignature and other.imem_addr_width == self.imem_addr_width
                and other.pc_width == self.pc_width)

    def __repr__(self):
        return f"HostSignature(imem_addr_width={self._imem_addr_width}, pc_width={self._pc_width})"


class DebugSignature(wiring.Signature):
    """The host's scratchpad read port, seen from the host: ``data`` is the word at the ``addr`` of the
    previous cycle. It reads only while no program runs."""

    def __init__(self, addr_width):
        self._addr_width = addr_width
        super().__init__({"addr": Out(addr_width), "data": In(WORD)})

    def __eq__(self, other):
        return type(other) is DebugSignature and other._addr_width == self._addr_width


def check_config(config):
    """``config``, or TypeError if it is not a :class:`ga2_sw.config.Config`."""
    if not isinstance(config, Config):
        raise TypeError(f"Config must be a ga2_sw.config.Config, not {config!r}")
    return config


class Unit(wiring.Component):
    """Base of the execution units: the sequencer's handshake ``ctl``, one scratchpad write port ``sp_wr`` and,
    unless a unit declares ports of its own, one read port ``sp_rd``, their addresses ``addr_width`` bits wide.

    Members
    -------
    ctl : In(UnitSignature)
    sp_rd : Out(SpReadSignature)
    sp_wr : Out(SpWriteSignature)
    """

    def __init__(self, *, addr_width, members=None, read_port=True):
        own = {"ctl": In(UnitSignature()), "sp_wr": Out(SpWriteSignature(addr_width))}
        if read_port:
            own["sp_rd"] = Out(SpReadSignature(addr_width))
        super().__init__({**own, **(members or {})})

    @property
    def read_ports(self):
        """The unit's scratchpad read ports. A unit with one port shares its lane's memory port with the
        lane's other units (a lane runs one instruction at a time); several ports each get a memory port."""
        return [self.sp_rd]

    @property
    def write_ports(self):
        """The unit's scratchpad write ports: one, shared with its lane's other units, unless a unit writes
        several words a cycle (the packed DMA), when each gets a memory port."""
        return [self.sp_wr]
