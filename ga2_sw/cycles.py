"""The cycle model of GA-2: per-instruction busy times and the counters (docs/ISA.md), in both modes.

In order, one instruction runs at a time and the counters follow from the busy times alone. Decoupled,
the DMA lane (LD, ST), the matrix lane (MM) and the vector lane (RQ, SM) run side by side and a scoreboard holds
back an instruction whose scratchpad ranges conflict with an instruction in flight (an MM until its last write,
which comes while the next MM reads):
``DecoupledTimer`` is that issue logic written as an event model (docs/ARCHITECTURE.md, "Decoupled execution").

These formulas are the timing of the RTL's state machines, written down; the test-suite holds the
reference machine, pysim and Verilator to them."""

from dataclasses import dataclass, astuple
from functools import lru_cache

from .banking import bank_among, bank_of, rq_beats, rq_follow_decision, rq_follow_wait, rq_write_skew, rq_write_track, slice_addresses
from .isa import LANES, ONLINE_OPS, OPS, Op, Err, decode, check, footprints, Instr
from .dram import DramTiming
from .packing import beat_bytes, beat_of, beats, bursts, byte_address
from .timing import (FETCH_CYCLES, ISSUE_CYCLES, RQ_DEPTH, SP_WRITE_DELAY, DIVIDER_LATENCY, SM_OVERHEAD,
                     STREAM_MM_OVERHEAD, MM_DRAIN_CYCLES, MM_PLAN_CYCLES, PORT_B_ANNOUNCE, rq_latency, sm_overhead,
                     sm_pass_cycles, smc_phases, rsa_busy, nrm_busy, mm_write_cycles)

__all__ = ["Counters", "busy_cycles", "unit_of", "lane_of", "accesses", "conflict", "ranges_conflict", "EXT_SPACE",
           "cycle_counts", "run_program", "DecoupledTimer", "InorderTimer", "ExternalPort", "vector_port_b", "mm_schedule", "online_requests",
           "MMSchedule",
           "ISSUE_CYCLES", "FETCH_CYCLES", "RQ_DEPTH", "SM_OVERHEAD", "DIVIDER_LATENCY", "STREAM_MM_OVERHEAD",
           "SP_WRITE_DELAY"]


@dataclass(frozen=True)
class Counters:
    """The chip's counters: the chapter's five, and the cycles the DMA waited on the bus beyond what the
    ideal memory would have made it (``ExternalPort``; always 0 on the bare port)."""
    cycles: int = 0
    mm: int = 0
    dma: int = 0
    vec: int = 0
    instructions: int = 0
    stall: int = 0

    def as_tuple(self):
        return astuple(self)

    def __add__(self, other):
        return Counters(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))


def unit_of(op):
    """The counter an opcode's busy time is charged to (``isa.OPS``)."""
    return OPS[op].counter


def busy_cycles(instr, config):
    """Busy time X of the unit that executes a (valid) instruction (``isa.OPS``)."""
    return OPS[instr.op].busy(instr, config)


def lane_of(op):
    """Decoupled mode's lane of an opcode (``isa.LANES``: DMA, matrix, vector; one instruction in flight each)."""
    return OPS[op].lane


# The external memory's ranges in ``accesses(..., external=True)``: word a of the external memory is address
# EXT_SPACE + a, past every scratchpad address, so one overlap test serves both memories and a scratchpad
# range never meets an external one.
EXT_SPACE = 1 << 64


def accesses(instr, external=False):
    """The ranges an instruction touches as (lo, hi, reads, writes), hi inclusive: its scratchpad ranges
    (``isa.OPS[op].sp``, in ``footprints`` order) and, with ``external``, its external-memory ranges after
    them (``.ext``), shifted by ``EXT_SPACE``.

    An MM's operand ranges are the bounding ranges of its strided reads: the scoreboard compares these,
    so an MM may wait for a write between its rows that it never reads (a false hazard costs time, never
    correctness)."""
    return list(_accesses(instr, external))


@lru_cache(maxsize=1 << 16)
def _accesses(instr, external):
    """``accesses`` as a tuple, kept: the list scheduler asks for an instruction's ranges at every step."""
    sp, ext = footprints(instr)
    spec = OPS[instr.op]
    out = [(lo, hi, "r" in k, "w" in k) for (lo, hi), (_, k) in zip(sp, spec.sp)]
    if external:
        out += [(EXT_SPACE + lo, EXT_SPACE + hi, "r" in k, "w" in k) for (lo, hi), (_, k) in zip(ext, spec.ext)]
    return tuple(out)


def ranges_conflict(xs, ys):
    """True when a write in one list of ``accesses`` overlaps any range of the other (RAW, WAR and WAW)."""
    return any((xw and (yr or yw) or xr and yw) and xlo <= yhi and ylo <= xhi
               for xlo, xhi, xr, xw in xs for ylo, yhi, yr, yw in ys)


def conflict(x, y, external=False):
    """True when two instructions touch a common word and at least one of them writes it (RAW, WAR and WAW
    alike). Scratchpad only by default: that is the scoreboard's rule for two instructions in flight
    together (only the DMA lane touches external memory, so two of them are never in flight at once);
    with ``external`` also external memory, the rule for keeping two instructions in program order
    (``schedule.dependences``)."""
    return ranges_conflict(_accesses(x, external), _accesses(y, external))


def vector_port_b(instr, start, config, first_read=None):
    """The banks an RQ or SM started in cycle ``start`` takes on port B, as ``{cycle: {bank, ...}}``: the cycle
    in which each of its read and write requests leaves the announce register (``PORT_B_ANNOUNCE`` after the
    unit's request, from the schedules of docs/ISA.md), which is when the matrix unit's requests of the same
    cycle would reach the bank with it. The matrix unit gives way to these (``mm_schedule``). An RQ reads from
    ``first_read`` (``DecoupledTimer._vector_issue``; ``start + 1`` when not given)."""
    taken = {}

    def request(cycle, addr):
        taken.setdefault(cycle + PORT_B_ANNOUNCE, set()).add(bank_of(addr, config))
    n = instr.len
    if instr.op == Op.RQ:           # element i: read in cycle first_read + i // lanes, written rq_latency (+ skew) later
        first_read = start + 1 if first_read is None else first_read
        first_write = first_read + rq_latency(config) + rq_write_skew(instr, config)
        lanes = config.rq_lanes
        for i in range(n):
            request(first_read + i // lanes, instr.src + i)
            request(first_write + i // lanes, instr.dst + i)
    elif instr.op == Op.SM:         # two reading passes of P cycles, then the quotients from 2P + 1 + overhead on
        lanes, passes = config.sm_lanes, sm_pass_cycles(n, config)
        first_write = start + 2 * passes + 1 + sm_overhead(config)
        for i in range(n):
            request(start + 1 + i // lanes, instr.src + i)
            request(start + passes + 1 + i // lanes, instr.src + i)
            request(first_write + i, instr.dst + i)
    elif instr.op in ONLINE_OPS:
        for offset, addr, _ in online_requests(instr, config):
            request(start + offset, addr)
    else:
        raise ValueError(f"{instr.op.name} is not on the vector lane")
    return taken


def online_requests(instr, config):
    """The online unit's scratchpad requests for an SMC, RSA or NRM: ``[(cycle after the start, address, "r" or
    "w")]``, one per cycle at most, every read before every write (``ga2_sw.timing``'s schedules)."""
    i, n = instr, instr.len
    if i.op == Op.SMC:
        first_pass, busy = smc_phases(n, config, i.ws)
        scores = [i.src + t + plane * i.ld for t in range(n) for plane in range(2)] if i.ws else \
            [i.src + t for t in range(n)]        # with ws each score's high word, then its low word
        reads = [(1, i.st), (2, i.st + 1)] + [(3 + c, addr) for c, addr in enumerate(scores)]
        writes = ([(first_pass + 3 + t, i.dst + t) for t in range(n)] +
                  [(first_pass + n + 4 + t, i.dst + i.ld + t) for t in range(n)] +
                  [(busy - 2 + k, i.st + k) for k in range(3)])
    elif i.op == Op.RSA:
        reads = [(1, i.a)] + [(2 + 3 * j + k, addr) for j in range(n)
                              for k, addr in enumerate((i.src + i.ld + j, i.src + j, i.dst + j))]
        first_write = rsa_busy(n, config) - n + 1
        writes = [(first_write + j, i.dst + j) for j in range(n)]
    elif i.op == Op.NRM:
        reads = [(1, i.st + 1)] + [(2 + j, i.src + j) for j in range(n)]
        first_write = nrm_busy(n, config) - n + 1
        writes = [(first_write + j, i.dst + j) for j in range(n)]
    else:
        raise ValueError(f"{i.op.name} is not an online instruction")
    assert busy_cycles(i, config) == writes[-1][0] and reads[-1][0] < writes[0][0], "the schedules of ga2_sw.timing"
    return [(c, a, "r") for c, a in reads] + [(c, a, "w") for c, a in writes]


@dataclass
class MMSchedule:
    """When a decoupled MM started in cycle ``start`` reads and writes (``mm_schedule``)."""
    start: int
    last_read: int      # the feeder's last cycle: the matrix lane takes the next MM from the cycle after
    last_write: int     # the result writer's last write: the MM is in flight until then
    claims: dict        # cycle -> the banks the result writer asks port B for in it (every cycle it writes or waits)


def mm_schedule(instr, start, taken, config, before=None):
    """The schedule of a decoupled MM started in cycle ``start``, beside a vector lane that holds the banks
    ``taken`` (``{cycle: banks}``, ``vector_port_b``) on port B and after the MM ``before`` (its
    ``MMSchedule``, or None), whose result writer may still be writing.

    The streaming feeder computes the first addresses and plans the first slice in the ``MM_PLAN_CYCLES``
    cycles after ``start`` and reads from the next on, slice after slice: in each cycle every operand of the
    slice not yet read is read, unless an earlier one not yet read is on its bank, or the vector lane or the
    previous MM's result writer asks for its bank in that cycle. The last slice's products overwrite the
    results the writer reads: when that writer is busy in the cycle before the last slice would be read
    (its last write in that cycle or later), the feeder waits and reads the last slice from the second cycle
    after the writer's last write. The last slice's
    last reads are the feeder's last cycle, ``last_read``. ``MM_DRAIN_CYCLES`` later the first result can be
    written; the results are written in row-major order, one a cycle, each in the first cycle from then on in
    which the vector lane does not ask for its bank. With ``row_writes`` a row is written a cycle instead,
    from ``N - 1`` cycles later (when the first row's last PE is done), each row in the first cycle in which
    the vector lane asks for none of its banks. Alone, this is ``last_write = start + busy_cycles(instr)``
    (``banking.mm_extra_cycles``, ``timing.mm_write_cycles``)."""
    plain = start + busy_cycles(instr, config)
    first_read = start + 1 + MM_PLAN_CYCLES
    if before is not None and before.last_write < first_read - 1:
        before = None               # finished before this MM's plan cycle: no effect
    if before is None and not any(cycle in taken for cycle in range(first_read, plain + 1)):
        last_read = plain - mm_write_cycles(instr.M, instr.N, config) - MM_DRAIN_CYCLES  # the slices alone
    else:
        last_read = _last_read(instr, first_read, taken, before, config)
    cycle = last_read + 1 + MM_DRAIN_CYCLES             # the first write's cycle at the earliest
    if config.row_writes:
        cycle += instr.N - 1
        writes = [[instr.dst + i * instr.ldc + j for j in range(instr.N)] for i in range(instr.M)]
    else:
        writes = [[instr.dst + i * instr.ldc + j] for i in range(instr.M) for j in range(instr.N)]
    claims = {}
    for words in writes:
        banks = {bank_of(a, config) for a in words}
        claims[cycle] = banks
        while banks & taken.get(cycle, set()):
            cycle += 1
            claims[cycle] = banks
        cycle += 1
    return MMSchedule(start, last_read, cycle - 1, claims)


def _last_read(instr, first_read, taken, before, config):
    """The cycle of an MM's last operand read (``mm_schedule``), slice by slice from ``first_read``."""
    writer = {} if before is None else before.claims

    def held(cycle):
        banks = taken.get(cycle, set())
        return banks | writer[cycle] if cycle in writer else banks
    cycle = first_read
    for k, (banks, distinct) in enumerate(_slice_banks(instr, config.sp_banks)):
        if k == instr.K - 1 and before is not None and before.last_write >= cycle - 1:
            cycle = max(cycle, before.last_write + 2)
        pending = range(len(banks))
        while True:
            busy = held(cycle)
            if distinct:                # no operand waits for another: only for the banks held
                waiting = [p for p in pending if banks[p] in busy] if busy else []
            else:
                waiting, seen = [], set()
                for p in pending:
                    if banks[p] in seen or banks[p] in busy:
                        waiting.append(p)
                    seen.add(banks[p])
            if not waiting:
                break                   # the slice's last reads are in this cycle
            pending = waiting
            cycle += 1
        cycle += 1
    return cycle - 1


@lru_cache(maxsize=4096)
def _slice_banks(instr, banks):
    """Each k-slice of an MM as (the banks of its operands in ``slice_addresses`` order, whether they are all
    different), kept for the list scheduler's repeated questions."""
    out = []
    for k in range(instr.K):
        of = tuple(bank_among(a, banks) for a in slice_addresses(instr, k))
        out.append((of, len(set(of)) == len(of)))
    return tuple(out)


class ExternalPort:
    """What the external memory does to LD and ST beyond the ``isa.OPS`` busy times (docs/ARCHITECTURE.md, "The
    AXI4 port" and "A DRAM behind the port"), fed each LD and ST in program order with its start cycle.

    On the bare port, and on an AXI4 port in front of the ideal memory, an LD is busy ``beats + ext_latency``
    and an ST ``beats + st_latency`` cycles (``timing.st_latency``: an AXI4 chip's ST a cycle more). AXI4
    answers writes on B: the ideal memory answers a burst
    ``ext_write_latency`` cycles after its last beat, and an LD whose beats meet those of an unanswered ST
    requests nothing until the last answer is in (the write fence); a HALT or a fault leaves its check cycle no
    earlier than that answer (``answered``). With ``ext_write_latency`` = 1 nothing ever waits.

    In front of a DRAM (``config.memory``, ``ga2_sw.dram``) the DMA still requests an LD's bursts on
    consecutive cycles and takes each R beat as it comes (one a cycle, in order), so the LD ends with its last
    beat, whenever the DRAM delivers it; an ST's W beats still go out a cycle each, and each burst is answered
    when the DRAM has written it. ``stall`` is the busy cycles beyond ``OPS``'s, the chip's stall counter."""

    def __init__(self, config):
        self.config = config
        self.answered = -1          # the cycle of the last answer on B
        self.written = None         # (first beat, last beat) of the STs since none was unanswered
        self.dram = DramTiming(config.memory, config.clock_mhz) if config.memory != "ideal" else None
        self.stall = 0

    def _beats(self, instr):
        """The first and last beat of an LD's or ST's external range, and its AXI bursts ((first beat, beats)
        each)."""
        (lo, hi), = footprints(instr)[1]
        return beat_of(lo, self.config), beat_of(hi, self.config), bursts(lo, hi - lo + 1, self.config)

    def _load_delay(self, instr, start):
        """Cycles an LD starting in ``start`` waits before its first request (it would make it in start + 1)."""
        if not self.config.axi or self.written is None or self.answered < start + 1:
            return 0
        first, last, _ = self._beats(instr)
        if first <= self.written[1] and self.written[0] <= last:
            return self.answered + 1 - (start + 1)
        return 0

    def load(self, instr, start):
        """The busy time of an LD that starts in ``start``."""
        ideal = busy_cycles(instr, self.config)
        delay = self._load_delay(instr, start)
        if self.dram is None:
            busy = ideal + delay
        else:
            beat = start                  # the R beats, one a cycle, each once the DRAM has it
            for n, (first, length) in enumerate(self._beats(instr)[2]):
                for ready in self.dram.read(start + 1 + delay + n, byte_address(first, self.config), length,
                                            beat_bytes(self.config)):
                    beat = max(ready, beat + 1)
            busy = beat - start
        self.stall += max(0, busy - ideal)
        return busy

    def store(self, instr, start):
        """The busy time of an ST that starts in ``start``; its answers on B."""
        busy = busy_cycles(instr, self.config)
        if not self.config.axi:
            return busy
        end = start + busy                     # its last W beat
        first, last, parts = self._beats(instr)
        if self.written is None or self.answered < start:           # nothing unanswered when it starts
            self.written = (first, last)
        else:
            self.written = (min(first, self.written[0]), max(last, self.written[1]))
        if self.dram is None:
            self.answered = end + self.config.ext_write_latency
            return busy
        sent = end - sum(length for _, length in parts)     # W beats: one a cycle up to `end`
        for n, (first, length) in enumerate(parts):
            sent += length
            due = self.dram.write(max(start + 1 + n, sent), byte_address(first, self.config), length,
                                  beat_bytes(self.config))
            self.answered = max(due, self.answered + 1)                  # one answer a cycle, in order
        return busy

    def busy(self, instr, start):
        """The busy time of an LD or ST that starts in ``start``."""
        return self.load(instr, start) if instr.op == Op.LD else self.store(instr, start)


class DecoupledTimer:
    """The decoupled issue logic as an event model: feed it the valid instructions in program order.

    Cycle 0 is the first fetch. Instruction n is decoded in cycle ``D`` and waits in the check state from
    cycle ``D + 1`` until (a) its lane can take it (the cycle after the lane's last busy cycle; for the matrix
    lane, the cycle after the MM's last read: its results are written beside the next MM) and (b) no
    conflicting instruction is in flight, that is, started and not past its last busy cycle or, for an MM,
    its last write; in that cycle it starts (its unit is busy from the next cycle) and instruction n + 1 is
    decoded in the cycle after. A HALT or a fault waits until every instruction has finished; the cycle it
    leaves the check state in is the last one counted.

    The matrix and vector lanes share the banks' port B, and the vector lane (RQ, SM: fixed pipelines) has it
    first, then the matrix unit's result writer, then its operand reads (``mm_schedule``). The vector lane's
    requests are known once its instruction has started, so the schedules of the MMs still in flight (the
    one being read and the one being written, at most) are worked out again, in order, whenever a vector
    instruction starts beside them. Their schedules change only after that start, and every decision taken
    before it (instructions issue in program order) depended on cycles before it, so none changes.

    With ``ld_overlap`` the DMA lane takes an LD from the cycle after the last LD's last request, while that
    LD's beats still come in, unless the LD before it is still writing too (the DMA holds two); an ST, and a
    HALT, wait for every LD's last write (the ST's reads would meet the LD's writes on port A)."""

    def __init__(self, config):
        self.config = config
        self.decode = FETCH_CYCLES               # cycle in which the next instruction is decoded
        self.free = {lane: 0 for lane in LANES}  # the first cycle each lane can take an instruction in
        self.executed = 0
        self.starts = []                         # [instr, start, end] in program order; end: last busy cycle,
        #                                          an MM's last write
        self.schedules = {}                      # index in `starts` of each MM -> its MMSchedule
        self._flying = []                        # indices of the instructions that may still be in flight
        self._taken = {}                         # cycle -> the banks the vector lane asks port B for
        self._last_mm = None                     # the index of the last MM
        self._before = {}                        # index of each MM -> the index of the MM before it
        self.port = ExternalPort(config)
        # The vector lane: the first cycle in which it has no write left to make (an SM or an online instruction
        # starts no earlier), and with rq_overlap the last RQ's (write track, last write) while it is the lane's
        # last instruction (the next RQ may start beside it).
        self._drained = 0
        self._last_rq = None
        # The DMA lane with ld_overlap: the first cycle in which no LD has a beat left to write (an ST starts no
        # earlier), and the last LD's last write.
        self._ld_drained = 0
        self._last_ld_end = -1

    def in_flight(self, cycle):
        """The ``[instr, start, end]`` records of the instructions in flight in ``cycle`` (of those issued)."""
        return [self.starts[n] for n in self._flying if self.starts[n][2] >= cycle]

    def lane_ready(self, instr):
        """The first cycle ``instr`` could start in were nothing in flight to conflict with it: decoded, its
        lane free (for the vector lane's SM and online instructions, also every RQ written)."""
        lane = lane_of(instr.op)
        ready = max(self.decode + 1, self.free[lane])
        if instr.op == Op.ST:
            return max(ready, self._ld_drained)
        return max(ready, self._drained) if lane == "vector" and instr.op != Op.RQ else ready

    def earliest_start(self, instr):
        """The cycle ``instr`` would start in if it were the next instruction (the timer is not changed)."""
        start = self.lane_ready(instr)
        flying = [(other, end) for other, _, end in self.in_flight(start) if conflict(instr, other)]
        for other, end in sorted(flying, key=lambda f: f[1]):
            if end >= start:
                start = end + 1
        return start

    def _schedule_mm(self, index):
        instr, start, _ = self.starts[index]
        before = self.schedules.get(self._before.get(index))
        schedule = self.schedules[index] = mm_schedule(instr, start, self._taken, self.config, before)
        self.starts[index][2] = schedule.last_write
        if index == self._last_mm:
            self.free["matrix"] = schedule.last_read + 1

    def _vector_issue(self, index, instr, start):
        """An RQ, SM or online instruction starts in cycle ``start``: record its last busy cycle and the lane's
        next free cycle, and return the RQ's first read (None for the others). With ``rq_overlap`` an RQ that
        starts while the RQ before it is still writing (its last write in cycle ``start`` or later) reads from
        ``start + rq_follow_decision + wait`` (``banking.rq_follow_wait``: 2 + wait with one lane), and the lane takes the next RQ after the last read, but
        not before the RQ before has written its last word (the requantiser holds two)."""
        config, before = self.config, self._last_rq
        following = instr.op == Op.RQ and before is not None and before[1] >= start
        first_read = (start + rq_follow_decision(config) + rq_follow_wait(instr, before[0], start, config)
                      if following else start + 1)
        end = self.starts[index][2] = first_read - 1 + busy_cycles(instr, config)
        self._drained = end + 1
        if instr.op == Op.RQ and config.rq_overlap:
            self.free["vector"] = max(first_read + rq_beats(instr, config), before[1] + 1 if following else 0)
            self._last_rq = (rq_write_track(instr, first_read, config), end)
        else:
            self.free["vector"], self._last_rq = end + 1, None
        return first_read if instr.op == Op.RQ else None

    def _ld_issue(self, instr, start, end):
        """With ``ld_overlap``: an LD that starts in ``start`` and writes its last beat in ``end`` frees the lane
        for the next LD after its last request (``start + beats``), but not before the LD before it has written
        its last beat if that one was still writing when this one started (the DMA holds two)."""
        following = self._last_ld_end >= start
        requests = beats(instr.src, instr.len, self.config)     # one a cycle from start + 1
        self.free["dma"] = max(start + requests + 1, self._last_ld_end + 1 if following else 0)
        self._last_ld_end, self._ld_drained = end, end + 1

    def issue(self, instr):
        start, lane = self.earliest_start(instr), lane_of(instr.op)
        index = len(self.starts)
        self.starts.append([instr, start, None])
        self._flying = [n for n in self._flying if self.starts[n][2] >= self.decode + 1] + [index]
        if instr.op == Op.MM:
            self._before[index], self._last_mm = self._last_mm, index
            self._schedule_mm(index)
        elif lane == "dma":
            end = self.starts[index][2] = start + self.port.busy(instr, start)
            self.free[lane] = end + 1
            if instr.op == Op.LD and self.config.ld_overlap:
                self._ld_issue(instr, start, end)
        else:
            first_read = self._vector_issue(index, instr, start)
        if lane == "vector":
            for cycle, banks in vector_port_b(instr, start, self.config, first_read).items():
                self._taken.setdefault(cycle, set()).update(banks)
            for n in sorted(n for n in self._flying if n in self.schedules and self.starts[n][2] > start):
                self._schedule_mm(n)
        self.executed += 1
        self.decode = start + 1
        return start

    @property
    def per_unit(self):
        """Busy cycles per counter so far (an MM's as worked out last): the cycles in which a unit of the
        counter is busy or drains, so an MM's writes beside the next MM's reads count once."""
        totals = {"mm": 0, "dma": 0, "vec": 0}
        covered = {"mm": -1, "dma": -1, "vec": -1}   # each counter's last counted cycle (an MM's writes beside
        #                                    the next MM's reads, an RQ's beside the next RQ with rq_overlap, an
        #                                    LD's beats beside the next LD's requests with ld_overlap)
        for instr, start, end in self.starts:
            counter = unit_of(instr.op)
            totals[counter] += end - max(start, covered[counter])
            covered[counter] = end
        return totals

    def stop(self, halted):
        """Counters after a HALT (``halted``) or a fault in the instruction now in the check state."""
        end = max([self.decode + 1, self.port.answered] + [last + 1 for _, _, last in self.starts])
        per_unit = self.per_unit
        return Counters(end + 1, per_unit["mm"], per_unit["dma"], per_unit["vec"],
                        self.executed + (1 if halted else 0), self.port.stall)


class InorderTimer:
    """In-order timing with the same interface as ``DecoupledTimer``: every instruction pays the issue
    cycles, then its unit's busy time, and nothing overlaps."""

    def __init__(self, config):
        self.config = config
        self.cycles = FETCH_CYCLES
        self.per_unit = {"mm": 0, "dma": 0, "vec": 0}
        self.executed = 0
        self.starts = []            # (instr, start cycle, last busy cycle), as DecoupledTimer.starts
        self.port = ExternalPort(config)

    def issue(self, instr):
        start = self.cycles + ISSUE_CYCLES - 1
        x = self.port.busy(instr, start) if lane_of(instr.op) == "dma" else busy_cycles(instr, self.config)
        self.starts.append((instr, start, start + x))
        self.cycles += ISSUE_CYCLES + x
        self.per_unit[unit_of(instr.op)] += x
        self.executed += 1

    def stop(self, halted):
        """Counters after a HALT (``halted``) or a fault in the instruction now being checked."""
        check = max(self.cycles + ISSUE_CYCLES - 1, self.port.answered)     # it waits for the last answer
        return Counters(check + 1, self.per_unit["mm"], self.per_unit["dma"],
                        self.per_unit["vec"], self.executed + (1 if halted else 0), self.port.stall)


def _as_instr(item):
    """Accept Instr objects or encoded words; return (Instr or None, decode error)."""
    if isinstance(item, Instr):
        return item, Err.NONE
    return decode(item)


def run_program(program, config, execute=None):
    """The program-counter loop of the chip: ``(Counters, Err, pc)`` of a program.

    Fetches, decodes and validates each instruction in turn, calls ``execute(instr)`` on every valid one
    (the reference machine passes its semantics; the cycle model passes nothing), and times it with the
    mode's timer. ``pc`` is the address of the HALT or of the faulting instruction. Validation is static
    (it depends only on the instruction fields), so a faulting program's counters and error code come out
    without executing anything. ``program`` is a list of Instr or of 128-bit words."""
    if len(program) > config.imem_words:
        raise ValueError(f"Program has {len(program)} instructions but instruction memory holds {config.imem_words}")
    timer = DecoupledTimer(config) if config.decoupled else InorderTimer(config)
    for pc in range(config.imem_words + 1):
        if pc == config.imem_words:
            return timer.stop(False), Err.PC_OVERFLOW, pc
        instr, err = _as_instr(program[pc]) if pc < len(program) else (None, Err.ILLEGAL)
        if err == Err.NONE:
            err = check(instr, config)
        if err != Err.NONE:
            return timer.stop(False), err, pc
        if instr.op == Op.HALT:
            return timer.stop(True), Err.NONE, pc
        if execute is not None:
            execute(instr)
        timer.issue(instr)


def cycle_counts(program, config):
    """(Counters, Err, pc) of a program, computed from the formulas alone, without executing it: in order
    or, in decoupled mode, through ``DecoupledTimer``."""
    return run_program(program, config)
