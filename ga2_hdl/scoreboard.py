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
    flight. When one issues, its ranges (``cand``) are copied into its lane's entry, which counts as in
    flight while that lane is busy. ``hazard`` is high when the candidate and an in-flight entry overlap
    with at least one of the two writing: read-after-write, write-after-read and write-after-write alike,
    on inclusive address ranges. The software twin is ``ga2_sw.cycles.conflict``; the cycle model's
    ``DecoupledTimer`` assumes exactly this rule.

    An in-flight instruction's last write request comes in its last busy cycle and lands one cycle later
    (``SP_WRITE_DELAY``); a waiting instruction starts, at the earliest, in the cycle after that last busy
    cycle and reads from the cycle after its start, so it sees the write.

    Members
    -------
    cand : In(access_layout)
        Ranges of the instruction waiting to issue (registered by the sequencer).
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
        super().__init__({"cand": In(layout), "issue": In(1), "issue_dma": In(1), "dma_busy": In(1),
                          "compute_busy": In(1), "hazard": Out(1)})

    def elaborate(self, platform):
        m = Module()
        layout = access_layout(self._config)
        dma_entry = Signal(layout)
        compute_entry = Signal(layout)
        with m.If(self.issue & self.issue_dma):
            m.d.sync += dma_entry.eq(self.cand)
        with m.If(self.issue & ~self.issue_dma):
            m.d.sync += compute_entry.eq(self.cand)
        m.d.comb += self.hazard.eq((self.dma_busy & _conflict(self.cand, dma_entry)) |
                                   (self.compute_busy & _conflict(self.cand, compute_entry)))
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
