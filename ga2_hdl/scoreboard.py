"""The decoupled scoreboard: holds back an instruction whose scratchpad ranges conflict with an instruction
still in flight on either lane."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .ports import access_layout

__all__ = ["Scoreboard"]

RANGES = "abc"


class Scoreboard(wiring.Component):
    """Hazard detection for decoupled mode (docs/ARCHITECTURE.md, "Decoupled execution").

    Each lane (DMA: LD, ST; compute: MM, RQ, SM) runs one instruction at a time, so at most two are in
    flight. When one issues, its ranges (the candidate's) are copied into its lane's entry, which counts as in
    flight while that lane is busy. ``hazard`` is high when the candidate and an in-flight entry overlap
    with at least one of the two writing: read-after-write, write-after-read and write-after-write alike,
    on inclusive address ranges. The software twin is ``ga2_sw.cycles.conflict``; the cycle model's
    ``DecoupledTimer`` assumes exactly this rule.

    The candidate's ranges come with ``load`` (the sequencer's decode cycle), and its overlaps with both
    entries are registered then: an instruction is decoded in the cycle after the previous one issued, so the
    entries hold their final values from the decode cycle until the candidate issues, and in the check cycles
    only the lanes' busy bits still change. (Compared in the check cycle itself, the ranges' eighteen
    magnitude compares ran into the issue decision, whose start pulse loads hundreds of registers across
    the chip.)

    An in-flight instruction's last write request comes in its last busy cycle and lands one cycle later
    (``SP_WRITE_DELAY``); a waiting instruction starts, at the earliest, in the cycle after that last busy
    cycle and reads from the cycle after its start, so it sees the write.

    Members
    -------
    ranges : In(access_layout)
        Ranges of the instruction being decoded, valid with ``load``.
    load : In(1)
        The decode cycle: the candidate becomes ``ranges``.
    issue : In(1)
        The candidate starts this cycle; ``issue_dma`` says on which lane.
    issue_dma : In(1)
    dma_busy, compute_busy : In(1)
        The lanes' units are busy (their entries are in flight).
    hazard : Out(1)
    """

    def __init__(self, config):
        self._config = config
        layout = access_layout(config)
        super().__init__({"ranges": In(layout), "load": In(1), "issue": In(1), "issue_dma": In(1),
                          "dma_busy": In(1), "compute_busy": In(1), "hazard": Out(1)})

    def elaborate(self, platform):
        m = Module()
        layout = access_layout(self._config)
        cand, dma_entry, compute_entry = Signal(layout), Signal(layout), Signal(layout)
        meets_dma, meets_compute = Signal(), Signal()       # the candidate overlaps that lane's entry
        with m.If(self.load):
            m.d.sync += [cand.eq(self.ranges), meets_dma.eq(_conflict(self.ranges, dma_entry)),
                         meets_compute.eq(_conflict(self.ranges, compute_entry))]
        with m.If(self.issue & self.issue_dma):
            m.d.sync += dma_entry.eq(cand)
        with m.If(self.issue & ~self.issue_dma):
            m.d.sync += compute_entry.eq(cand)
        m.d.comb += self.hazard.eq((self.dma_busy & meets_dma) | (self.compute_busy & meets_compute))
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
    out = terms[0]
    for t in terms[1:]:
        out = out | t
    return out
