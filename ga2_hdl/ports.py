"""Signatures and layouts shared by the GA-2 units: the decoded instruction, the scratchpad ports, the
external-memory port and the start/busy/done handshake every execution unit has."""

from amaranth.hdl import unsigned, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

__all__ = ["InstrLayout", "access_layout", "SpReadSignature", "SpWriteSignature", "ExtSignature", "unit_members",
           "sp_addr_width", "ext_addr_width", "WORD"]

WORD = 32

# The 128-bit instruction word of docs/ISA.md, bit for bit. Slots are shared between opcodes:
#   src is MM's A, len is MM's B, k is MM's K and RQ's m (signed), M's low 6 bits are RQ's s.
InstrLayout = data.StructLayout({
    "op":   unsigned(4),
    "tb":   unsigned(1),
    "rsv0": unsigned(3),
    "dst":  unsigned(16),
    "src":  unsigned(16),
    "len":  unsigned(16),
    "k":    unsigned(16),
    "M":    unsigned(8),
    "N":    unsigned(8),
    "lda":  unsigned(12),
    "ldb":  unsigned(12),
    "ldc":  unsigned(12),
    "rsv1": unsigned(4),
})
assert InstrLayout.size == 128


def access_layout(config):
    """The scratchpad ranges of an instruction for the decoupled scoreboard: up to three inclusive ranges
    ``a``, ``b``, ``c`` (``ga2_sw.cycles.accesses``: LD writes a; ST reads a; MM reads a, b and writes c;
    RQ and SM read a and write b), each flagged as read and/or written; an unused range has neither flag."""
    aw = sp_addr_width(config)
    rng = data.StructLayout({"lo": unsigned(aw), "hi": unsigned(aw), "rd": unsigned(1), "wr": unsigned(1)})
    return data.StructLayout({"a": rng, "b": rng, "c": rng})


def sp_addr_width(config):
    return max(1, ceil_log2(config.sp_words))


def ext_addr_width(config):
    return max(1, ceil_log2(config.ext_words))


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
    with ``rvalid`` high; the memory (the simulation harness) has a fixed latency and never stalls."""
    def __init__(self, addr_width):
        super().__init__({"addr": Out(addr_width), "re": Out(1), "we": Out(1), "wdata": Out(WORD),
                          "rdata": In(WORD), "rvalid": In(1)})


def unit_members(config):
    """Members every execution unit has: the handshake with the sequencer and the scratchpad ports.

    ``start`` is a one-cycle pulse with ``instr`` valid in the same cycle. ``busy`` is high for exactly the
    unit's busy time X (docs/ISA.md) starting the cycle after ``start``; ``done`` is high in the last busy
    cycle only."""
    aw = sp_addr_width(config)
    return {
        "start": In(1),
        "instr": In(InstrLayout),
        "busy": Out(1),
        "done": Out(1),
        "sp_rd": Out(SpReadSignature(aw)),
        "sp_wr": Out(SpWriteSignature(aw)),
    }
