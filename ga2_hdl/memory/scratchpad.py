"""The on-chip scratchpad: synchronous read ports and registered write ports on a word-addressed memory."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In

from ga2_sw.timing import SP_WRITE_DELAY

from ..ports import SpReadSignature, SpWriteSignature, WORD

__all__ = ["Scratchpad", "PortGroups", "and_or", "or_all", "check_groups"]


class PortGroups(wiring.Component):
    """What both scratchpads share: named groups of read and write requesters as signature members
    (``rd_<group>``, ``wr_<group>``, of ``addr_width``-bit addresses), validated, and the accessors of the
    groups."""

    def __init__(self, *, addr_width, reads, writes, members=None):
        self._reads = check_groups(reads, "Read")
        self._writes = check_groups(writes, "Write")
        aw = addr_width
        super().__init__({
            **{f"rd_{g}": In(SpReadSignature(aw)).array(n) for g, n in self._reads.items()},
            **{f"wr_{g}": In(SpWriteSignature(aw)).array(n) for g, n in self._writes.items()},
            **(members or {}),
        })

    def read_group(self, name):
        """The read requesters of group ``name``."""
        return getattr(self, f"rd_{name}")

    def write_group(self, name):
        """The write requesters of group ``name``."""
        return getattr(self, f"wr_{name}")

    @property
    def write_requested(self):
        """High when any requester asks for a write this cycle (for checks that watch the memory)."""
        return Cat(*(port.en for g in self._writes for port in self.write_group(g))).any()


class Scratchpad(PortGroups):
    """``depth`` words of 32 bits (``Config.sp_words``; addresses ``addr_width`` bits wide) with named groups of
    read and write ports.

    Each group is one port of the memory, shared by the requesters of the group; ``reads`` and ``writes``
    map a group's name to its number of requesters. The requesters of a group must never ask in the same
    cycle (a lane runs one instruction at a time; the top level puts the units of one lane in one group).
    In order, one read group and one write group serve the whole chip, which maps to block RAM; decoupled,
    the lanes have groups of their own and the streaming matrix unit a read port per array row and column
    (docs/SYNTH.md, "Decoupled mode").

    A read group of several requesters is a one-hot AND-OR of their addresses, gated by their enables, and
    every requester sees the port's data; a group of one is wired straight through. A write request is
    registered first and reaches the memory ``SP_WRITE_DELAY`` cycle later, through a one-hot AND-OR of the
    registered requests of its group: the requesters' result logic then ends at a register next to them
    instead of running through the merge into the block RAM (the chip's critical path at 88 MHz).

    A read and a write of the same address in the same cycle return the old word. Together with the write
    delay this fixes what an RQ whose destination overlaps its source sees (docs/ISA.md), and the reference
    machine models it the same way.

    Members
    -------
    rd_<group> : In(SpReadSignature).array(n)
        The read requesters of a group.
    wr_<group> : In(SpWriteSignature).array(n)
        The write requesters of a group.

    Raises
    ------
    ValueError
        If a group's name is not an identifier or its number of requesters is not a positive integer.
    """

    def __init__(self, *, depth, addr_width, reads=None, writes=None, init=()):
        super().__init__(addr_width=addr_width, reads=reads or {"shared": 1}, writes=writes or {"shared": 1})
        self.mem = memory.Memory(shape=WORD, depth=depth, init=list(init))

    def cell(self, addr):
        """The simulator's handle on word ``addr`` (for ``ctx.get``/``ctx.set``)."""
        return self.mem.data[addr]

    def read_latency(self, group):
        """Cycles from a read request of ``group`` to its data: the memory's one-cycle read, for every group."""
        return 1

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = self.mem
        for group in self._reads:
            requesters, port = list(self.read_group(group)), mem.read_port()
            enables = [r.en for r in requesters]
            m.d.comb += [port.en.eq(Cat(*enables).any()), *(r.data.eq(port.data) for r in requesters),
                         port.addr.eq(and_or(zip(enables, (r.addr for r in requesters)))
                                      if len(requesters) > 1 else requesters[0].addr)]
        assert SP_WRITE_DELAY == 1, "a write request is registered once before the memory"
        for group in self._writes:
            requests, port = [], mem.write_port()
            for n, req in enumerate(self.write_group(group)):
                q = (Signal(name=f"{group}{n}_en"), Signal.like(req.addr, name=f"{group}{n}_addr"),
                     Signal.like(req.data, name=f"{group}{n}_data"))
                m.d.sync += [q[0].eq(req.en), q[1].eq(req.addr), q[2].eq(req.data)]
                requests.append(q)
            m.d.comb += [port.en.eq(Cat(*(en for en, _, _ in requests)).any()),
                         port.addr.eq(and_or((en, addr) for en, addr, _ in requests)),
                         port.data.eq(and_or((en, data) for en, _, data in requests))]
        return m


def check_groups(groups, what):
    """``groups`` as a dict, or ValueError naming a bad group name or requester count."""
    for name, count in groups.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise ValueError(f"{what} group name must be an identifier, not {name!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{what} group {name!r} must have a positive number of requesters, not {count!r}")
    return dict(groups)


def or_all(values):
    """The bitwise OR of ``values`` (at least one)."""
    out = values[0]
    for value in values[1:]:
        out = out | value
    return out


def and_or(requests):
    """OR of each value gated by its enable: a one-hot multiplexer without a priority chain."""
    terms = [value & en.replicate(len(value)) for en, value in requests]
    return or_all(terms) if terms else Const(0, 1)
