"""Reordering a program for decoupled execution without changing what it computes.

A decode step is written in the natural order (docs/ISA.md semantics are program order). In decoupled mode
the chip still issues in program order, one instruction at a time, so how much the DMA overlaps compute is
decided by the order the builder emits. ``reorder`` keeps every pair of instructions that touch a common
word (scratchpad or external, at least one of them writing) in their original order, so the reordered
program leaves exactly the same memories; within that freedom it list-schedules against the cycle model
itself (``cycles.DecoupledTimer``): the ready instruction that can start first goes next, and of those
that could start equally early the one heading the longest chain of dependent work. A greedy schedule can
lose to the order it started from (an MM slowed by bank conflicts put first delays a longer chain behind it:
one crowded random program took 559 cycles reordered, 488 as written, on 8 banks), so ``reorder`` keeps
whichever the cycle model finds fastest of its schedules (one for each ordering of lanes it is asked to try)
and the program as written.
"""

from .cycles import DecoupledTimer, accesses, busy_cycles, cycle_counts, lane_of, ranges_conflict
from .isa import Op

__all__ = ["dependences", "reorder"]


def dependences(program, ordered_lanes=(), window=None):
    """For each instruction, the indices of the earlier ones it must stay behind: those it ``conflicts``
    with in either memory (``cycles.conflict(x, y, external=True)``, the ranges computed once each), and on a
    lane of ``ordered_lanes`` the lane's instruction before it. With ``window``, only the ``window``
    instructions before each are looked at (enough for a schedule that never runs an instruction more than
    ``window`` places ahead of the oldest one not yet scheduled)."""
    ranges = [accesses(i, external=True) for i in program]
    deps = [[i for i in range(0 if window is None else max(0, j - window), j) if ranges_conflict(ranges[i], y)]
            for j, y in enumerate(ranges)]
    before = {}
    for j, instr in enumerate(program):
        lane = lane_of(instr.op)
        if lane in ordered_lanes:
            if lane in before and before[lane] not in deps[j]:
                deps[j].append(before[lane])
            before[lane] = j
    return deps


def reorder(program, config, orderings=((),), window=None):
    """The instructions of ``program`` (valid, ending in HALT) in an order for decoupled execution: one list
    schedule for each entry of ``orderings`` (the lanes whose instructions keep their program order, the
    builder's plan for those lanes; ``()`` leaves every lane free), and the fastest of those schedules and
    the program as written by the cycle model (on a tie the earliest schedule, the program last). With
    ``window`` an instruction is never scheduled ``window`` or more places ahead of the oldest one not yet
    scheduled: the dependences then need only be looked for that far back, so a long program takes time
    linear in its length."""
    if not program or program[-1].op != Op.HALT or any(i.op == Op.HALT for i in program[:-1]):
        raise ValueError("reorder needs a program of valid instructions with one HALT, at its end")
    if not orderings:
        raise ValueError("reorder needs at least one ordering of lanes to try")
    candidates = [_list_schedule(program[:-1], config, ordered_lanes, window) + [program[-1]]
                  for ordered_lanes in orderings] + [list(program)]
    return min(candidates, key=lambda order: cycle_counts(order, config)[0].cycles)


def _list_schedule(body, config, ordered_lanes, window=None):
    """``body`` (no HALT) list-scheduled against the cycle model, each lane of ``ordered_lanes`` in program
    order, within ``window`` places of the oldest instruction not yet scheduled."""
    deps = dependences(body, ordered_lanes, window)
    users = [[] for _ in body]
    for j, ds in enumerate(deps):
        for i in ds:
            users[i].append(j)
    # Longest chain of busy time that waits for each instruction (its own excluded: every load costs the
    # one DMA the same, what matters is how much work it unlocks).
    chain = [0] * len(body)
    for i in reversed(range(len(body))):
        chain[i] = max((busy_cycles(body[j], config) + chain[j] for j in users[i]), default=0)
    waiting = [len(ds) for ds in deps]
    ready = {i for i, n in enumerate(waiting) if n == 0}
    timer = DecoupledTimer(config)
    order = []
    done = [False] * len(body)
    oldest = 0
    while ready:
        eligible = ready if window is None else [i for i in ready if i < oldest + window]
        best = min(eligible, key=lambda i: (timer.earliest_start(body[i]), -chain[i],
                                             lane_of(body[i].op) != "dma", i))
        ready.remove(best)
        done[best] = True
        while oldest < len(body) and done[oldest]:
            oldest += 1
        timer.issue(body[best])
        order.append(body[best])
        for j in users[best]:
            waiting[j] -= 1
            if waiting[j] == 0:
                ready.add(j)
    return order
