"""The decoupled scoreboard: holds back an instruction whose scratchpad ranges conflict with an instruction
still in flight on another lane."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.isa import LANES

from .ports import access_layout
from .scratchpad import or_all

__all__ = ["Scoreboard"]

RANGES = "abc"


class Scoreboard(wiring.Component):
    """Hazard detection for decoupled mode (docs/ARCHITECTURE.md, "Decoupled execution").

    Each lane (``ga2_sw.isa.LANES``: DMA: LD, ST; matrix: MM; vector: RQ, SM) runs one instruction at a time, so
    at most one is in flight per lane. When one issues, its ranges (the candidate's) are copied into its lane's
    entry, which counts as in flight while that lane is busy. The candidate and an entry conflict when they
    overlap with at least one of the two writing: read-after-write, write-after-read and write-after-write
    alike, on inclusive address ranges. ``blocked[n]`` is high when a candidate on lane ``n`` conflicts with
    the entry of another lane in flight; its own lane's entry does not count, as the sequencer waits for that
    lane to be free in any case. The software twin is ``ga2_sw.cycles.conflict``; the cycle model's
    ``DecoupledTimer`` assumes exactly this rule.

    The candidate's ranges come with ``load`` (the sequencer's decode cycle), and its overlaps with every
    entry are registered then: an instruction is decoded in the cycle after the previous one issued, so the
    entries hold their final values from the decode cycle until the candidate issues, and in the check cycles
    only the lanes' busy bits still change. (Compared in the check cycle itself, the ranges' eighteen
    magnitude compares ran into the issue decision, whose start pulse loads hundreds of registers across
    the chip.) So each ``blocked`` bit is three busy bits against three registered overlaps, and the issue
    decision it feeds is two LUTs deep from the lanes' registers.

    An in-flight instruction's last write request comes in its last busy cycle and lands one cycle later
    (``SP_WRITE_DELAY``); a waiting instruction starts, at the earliest, in the cycle after that last busy
    cycle and reads from the cycle after its start, so it sees the write.

    Members
    -------
    ranges : In(access_layout)
        Ranges of the instruction being decoded, valid with ``load``.
    load : In(1)
        The decode cycle: the candidate becomes ``ranges``.
    issue : In(len(LANES))
        The candidate starts this cycle on the lane of the bit set (one-hot, ``LANES`` order).
    busy : In(len(LANES))
        Each lane's unit is busy (its entry is in flight).
    blocked : Out(len(LANES))
        The candidate, were it on lane ``n``, conflicts with another lane's entry in flight.
    """

    def __init__(self, config):
        self._config = config
        layout = access_layout(config)
        super().__init__({"ranges": In(layout), "load": In(1), "issue": In(len(LANES)), "busy": In(len(LANES)),
                          "blocked": Out(len(LANES))})

    def elaborate(self, platform):
        m = Module()
        layout = access_layout(self._config)
        cand = Signal(layout)
        entries = [Signal(layout, name=f"{lane}_entry") for lane in LANES]
        meets = [Signal(name=f"meets_{lane}") for lane in LANES]     # the candidate overlaps that lane's entry
        with m.If(self.load):
            m.d.sync += [cand.eq(self.ranges), *(meet.eq(_conflict(self.ranges, entry))
                                                 for meet, entry in zip(meets, entries))]
        for n, entry in enumerate(entries):
            with m.If(self.issue[n]):
                m.d.sync += entry.eq(cand)
        in_flight = [busy & meet for busy, meet in zip(self.busy, meets)]   # busy lanes whose entry conflicts
        m.d.comb += self.blocked.eq(Cat(*(or_all(in_flight[:n] + in_flight[n + 1:]) for n in range(len(LANES)))))
        return m


def _conflict(x, y):
    """Any range of x overlaps any range of y with one of the two written."""
    terms = []
    for p in RANGES:
        xp = getattr(x, p)
        for q in RANGES:
            yq = getattr(y, q)
            kinds = (xp.wr & (yq.rd | yq.wr)) | (xp.rd & yq.wr)
            terms.append(kinds & (xp.lo <= yq.hi) & (yq.lo <= xp.hi))
    return or_all(terms)
