"""The decoupled scoreboard: holds back an instruction whose scratchpad ranges conflict with an instruction
still in flight on another lane."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.isa import LANES, OPS, enabled

from ..ports import access_layout
from ..memory.scratchpad import or_all

__all__ = ["Scoreboard"]

RANGES = "abc"


class Scoreboard(wiring.Component):
    """Hazard detection for decoupled mode (docs/ARCHITECTURE.md, "Decoupled execution").

    Each lane (``ga2_sw.isa.LANES``: DMA: LD, ST; matrix: MM; vector: RQ, SM) takes one instruction at a time,
    and its entry holds the ranges of the last one it started (the candidate's, copied when it issues). An MM
    stays in flight after its lane is free: the matrix unit's result writer drains it while the next MM reads
    (``draining``). So the matrix lane has a second entry, ``before``, which takes the last MM's ranges when the
    next one issues. In flight: the DMA and vector entries while their lanes are busy; the matrix entry while
    its lane is busy or the unit drains (the last MM is read, then written); ``before`` while the lane is busy
    and the unit drains (the MM before it is still being written). So every instruction is in flight from the
    cycle after its start to its last busy cycle or, for an MM, its last write, which is the cycle model's rule
    (``ga2_sw.cycles.DecoupledTimer``), and both bits come from registers.

    The candidate and an entry conflict when they overlap with at least one of the two writing:
    read-after-write, write-after-read and write-after-write alike, on inclusive address ranges.
    ``blocked[n]`` is high when a candidate on lane ``n`` conflicts with an entry in flight, but for the DMA
    and vector lanes' own entries, which are in flight only while the lane is busy: the sequencer waits for
    the lane to be free in any case. The software twin is ``ga2_sw.cycles.conflict``.

    The candidate's ranges come with ``load`` (the sequencer's decode cycle), and its overlaps with every
    entry are registered then: an instruction is decoded in the cycle after the previous one issued, so the
    entries hold their final values from the decode cycle until the candidate issues. (Compared in the check
    cycle itself, the ranges' magnitude compares ran into the issue decision, whose start pulse loads hundreds
    of registers across the chip.) So each ``blocked`` bit is busy bits against registered overlaps.

    An in-flight instruction's last write request comes in its last busy (or draining) cycle and lands one
    cycle later (``SP_WRITE_DELAY``); a waiting instruction starts, at the earliest, in the cycle after and
    reads from the cycle after its start, so it sees the write.

    Parameters: the scratchpad's address width ``sp_addr_width``; the chip's ``features`` (a set of
    ``ga2_sw.isa.Feature``: which opcodes each lane runs, so which flags its entries keep); ``rq_overlap`` and
    ``ld_overlap``, the requantiser and the DMA that hold two instructions (below).

    Members
    -------
    ranges : In(access_layout(sp_addr_width))
        Ranges of the instruction being decoded, valid with ``load``.
    load : In(1)
        The decode cycle: the candidate becomes ``ranges``.
    issue : In(len(LANES))
        The candidate starts this cycle on the lane of the bit set (one-hot, ``LANES`` order).
    busy : In(len(LANES))
        Each lane's unit is busy.
    draining : In(1)
        The matrix unit's result writer has an MM's results to write.
    vector_draining, vector_older : In(1)
        With ``rq_overlap`` (``OverlappedRequantiser``): the requantiser has words to write, and the RQ before
        its last one started still has. The vector lane's entry is then in flight while its lane is busy or the
        requantiser drains, and is compared with a vector candidate too (the next RQ may start beside it); a
        second entry, ``vector_before``, takes it when the next vector instruction issues and is in flight
        while ``vector_older``.
    dma_draining, dma_older : In(1)
        With ``ld_overlap`` (``PackedDMA``): an LD has beats still to write, and the LD before the last one
        started still has. Likewise: the DMA lane's entry is in flight while its lane is busy or an LD drains
        and is compared with a DMA candidate too; ``dma_before`` takes it when the next DMA instruction issues
        and is in flight while ``dma_older``.
    blocked : Out(len(LANES))
        The candidate, were it on lane ``n``, conflicts with an instruction in flight.
    """

    def __init__(self, *, sp_addr_width, features=frozenset(), rq_overlap=False, ld_overlap=False):
        self.features, self.rq_overlap, self.ld_overlap = frozenset(features), bool(rq_overlap), bool(ld_overlap)
        super().__init__({"ranges": In(access_layout(sp_addr_width)), "load": In(1), "issue": In(len(LANES)),
                          "busy": In(len(LANES)), "draining": In(1), "blocked": Out(len(LANES)),
                          **({"vector_draining": In(1), "vector_older": In(1)} if rq_overlap else {}),
                          **({"dma_draining": In(1), "dma_older": In(1)} if ld_overlap else {})})

    def _two_deep(self):
        """``(lane, draining, older)`` of each lane whose unit holds two instructions on this chip."""
        return ([("vector", self.vector_draining, self.vector_older)] if self.rq_overlap else []) + \
               ([("dma", self.dma_draining, self.dma_older)] if self.ld_overlap else [])

    def elaborate(self, platform):
        m = Module()
        layout = self.ranges.shape()
        matrix = LANES.index("matrix")
        two_deep = self._two_deep()
        cand = Signal(layout)
        # One entry per lane, then the second entry of each lane whose unit holds two instructions (with
        # rq_overlap the vector lane's, with ld_overlap the DMA lane's), then the matrix lane's second; each
        # entry's lane.
        names = [*LANES, *(f"{lane}_before" for lane, _, _ in two_deep), "before"]
        entries = [Signal(layout, name=f"{name}_entry") for name in names]
        lanes = [*range(len(LANES)), *(LANES.index(lane) for lane, _, _ in two_deep), matrix]
        meets = [Signal(name=f"meets_{name}") for name in names]     # the candidate overlaps the entry
        with m.If(self.load):
            m.d.sync += [cand.eq(self.ranges), *(meet.eq(_conflict(self.ranges, entry))
                                                 for meet, entry in zip(meets, entries))]
        for n, lane in enumerate(LANES):
            with m.If(self.issue[n]):
                m.d.sync += _copy_kinds(entries[n], cand, lane_kinds(lane, self.features))
        with m.If(self.issue[matrix]):
            m.d.sync += entries[-1].eq(entries[matrix])
        in_flight = [*self.busy, self.busy[matrix] & self.draining]
        in_flight[matrix] = self.busy[matrix] | self.draining
        own = [[] for _ in LANES]       # a lane's own entries that block its candidate, beyond the matrix lane's
        for lane, draining, older in two_deep:
            # The next instruction may start beside the last, which is in flight while the unit drains, and the
            # one before it, in flight while `older`.
            n, second = LANES.index(lane), names.index(f"{lane}_before")
            with m.If(self.issue[n]):
                m.d.sync += _copy_kinds(entries[second], entries[n], lane_kinds(lane, self.features))
            in_flight[n] = self.busy[n] | draining
            in_flight.insert(second, older)
        assert len(in_flight) == len(entries)
        conflicts = [flying & meet for flying, meet in zip(in_flight, meets)]
        for lane, _, _ in two_deep:
            n = LANES.index(lane)
            own[n] = [conflicts[n], conflicts[names.index(f"{lane}_before")]]
        m.d.comb += self.blocked.eq(Cat(*(or_all([c for c, lane in zip(conflicts, lanes)
                                                  if lane != n or lane == matrix] + own[n])
                                          for n in range(len(LANES)))))
        return m


def lane_kinds(lane, features):
    """``{range: set of "r"/"w"}``: how the instructions of ``lane`` may use each range (``ga2_sw.isa.OPS``) on
    a chip of ``features``."""
    kinds = {p: set() for p in RANGES}
    for op, spec in OPS.items():
        if spec.lane == lane and enabled(op, features):
            for p, (_, k) in zip(RANGES, spec.sp):
                kinds[p] |= set(k)
    return kinds


def _copy_kinds(entry, cand, kinds):
    """entry = cand, keeping only the flags that the entry's lane can set: the others stay at their reset 0, so
    synthesis drops their flip-flops and every comparison they gate (a DMA entry has one range, not three)."""
    out = []
    for p in RANGES:
        e, c = getattr(entry, p), getattr(cand, p)
        if kinds[p]:
            out += [e.lo.eq(c.lo), e.hi.eq(c.hi)]
        out += [getattr(e, f).eq(getattr(c, f)) for f, k in (("rd", "r"), ("wr", "w")) if k in kinds[p]]
    return out


def _at_most(a, b):
    """a <= b as the borrow of b - a: one carry chain (CCU2C on ECP5), where a comparator left to the LUT mapper
    took three or four LUT levels in front of the conflict's AND-OR."""
    return ~(b.as_unsigned() - a.as_unsigned())[len(b)]


def _conflict(x, y):
    """Any range of x overlaps any range of y with one of the two written."""
    terms = []
    for p in RANGES:
        xp = getattr(x, p)
        for q in RANGES:
            yq = getattr(y, q)
            kinds = (xp.wr & (yq.rd | yq.wr)) | (xp.rd & yq.wr)
            terms.append(kinds & _at_most(xp.lo, yq.hi) & _at_most(yq.lo, xp.hi))
    return or_all(terms)
