"""An AXI4 subordinate memory for pysim: the bare port's ideal memory behind AXI4 handshakes, or the same with
random pauses on every channel (docs/ARCHITECTURE.md, "The AXI4 port")."""

import random
from collections import deque

from ga2_sw.dram import DramTiming
from ga2_sw.packing import AXI_PAGE_BYTES, beat_bytes, held_image

__all__ = ["AxiMemoryModel"]


class AxiMemoryModel:
    """``config.ext_words`` elements behind an AXI4 subordinate port, run as a background testbench
    (``ChipBench`` starts it): ``port`` is the chip's ``ext``.

    Without pauses it is the ideal memory the cycle model assumes: AR and AW are taken every cycle, a read
    burst taken in cycle c is answered a beat per cycle from cycle c + ``config.ext_latency`` on (bursts one
    after the other), W is taken every cycle, before its burst's AW too (AXI lets a subordinate take it first), and
    a write burst is answered on B ``config.ext_write_latency`` cycles after its last beat. A write burst's beats land in the memory when
    its B is taken, not before: AXI promises a manager nothing about a read of those bytes until then, so a
    chip that read around an unanswered write would see the old bytes here. With ``pause`` > 0 each channel's ready
    (AR, AW, W) and valid (R, B) is also held low in a cycle with that probability, drawn from ``seed``: a
    legal subordinate slower than the ideal one, which must leave the same memory. A burst across 4 KiB or a
    WLAST on the wrong beat fails the run (AssertionError naming the rule).

    With ``config.memory`` a DRAM grade, the DRAM's timing (``ga2_sw.dram.DramTiming``) decides when each
    read beat may be on R and when a write burst is answered, instead of the two latencies; the DRAM starts
    afresh (banks precharged, a refresh interval beginning) in the chip's first counted cycle of every run
    (``running`` rises), the cycle model's cycle 0."""

    def __init__(self, config, init=(), *, pause=0.0, seed=0):
        self._config, self.pause, self._seed = config, pause, seed
        self.load(init)
        self.port = self.running = None

    def load(self, init):
        """Hold image ``init`` (elements, as ``__init__`` takes them) in place of the memory's contents."""
        self._elements = held_image(init, self._config)
        self._elements += [0] * (self._config.ext_words - len(self._elements))

    def elements(self, ctx=None):
        """The memory's elements now."""
        return list(self._elements)

    def _beat(self, beat):
        cfg, mem = self._config, self._elements
        if cfg.bus_bytes == 1:
            return mem[beat]
        w = cfg.bus_bytes
        return sum(mem[beat * w + j] << (8 * j) for j in range(w))

    def _write(self, beat, data, strobe):
        cfg, mem = self._config, self._elements
        if cfg.bus_bytes == 1:
            if strobe == 0xF:
                mem[beat] = data
            else:                           # bytes of the word (the chip always writes whole words here)
                mem[beat] = sum(((data if strobe >> j & 1 else mem[beat]) >> (8 * j) & 0xFF) << (8 * j)
                                for j in range(4))
            return
        w = cfg.bus_bytes
        for j in range(w):
            if strobe >> j & 1:
                mem[beat * w + j] = (data >> (8 * j)) & 0xFF

    def _match_w_beats(self, writes, beats_in, answers, dram, origin):
        """Give each W beat taken to the oldest write burst still short of beats, and queue a burst's answer on
        B once its last beat is in (``writes``, ``beats_in`` and ``answers`` as ``run`` keeps them)."""
        cfg, size = self._config, beat_bytes(self._config)
        beats = cfg.ext_words // cfg.bus_bytes
        while writes and beats_in:
            taken, data, strobe, last = beats_in.popleft()
            burst = writes[0]
            if burst[0] < beats:
                burst[2].append((burst[0], data, strobe))
            burst[0] += 1
            burst[1] -= 1
            if last != (burst[1] == 0):
                raise AssertionError(f"AXI protocol: WLAST {int(last)} on a beat with {burst[1]} beats of its "
                                     f"burst left")
            if not burst[1]:
                arrived = max(taken, burst[3])
                if dram is None:
                    due = arrived + cfg.ext_write_latency
                else:
                    due = origin + dram.write(arrived - origin, burst[4], burst[0] - burst[4] // size, size)
                answers.append((due, writes.popleft()[2]))

    async def run(self, ctx):
        port, cfg = self.port, self._config
        rng = random.Random(self._seed)
        size = beat_bytes(cfg)
        beats = cfg.ext_words // cfg.bus_bytes
        # reads: [first cycle, beat, left, each beat's cycle from the DRAM]; writes: [beat, left, beats written,
        # AW's cycle, first byte]; W beats not yet matched to an AW (a subordinate may take W first);
        # answers: [cycle B is due, the burst's beats]
        reads, writes, beats_in, answers = deque(), deque(), deque(), deque()
        cycle = 0
        dram, origin, was_running = None, 0, False      # with a DRAM: its timing, and its cycle 0

        def open_():
            return not (self.pause and rng.random() < self.pause)

        ctx.set(port.rresp, 0)
        ctx.set(port.bresp, 0)
        while True:
            ar_ready, aw_ready, w_ready = open_(), open_(), open_()
            # (with a DRAM, each beat as it delivers it)
            due = reads and (reads[0][0] <= cycle if dram is None else reads[0][3][0] <= cycle - origin)
            r_valid = bool(due) and open_()
            b_valid = bool(answers) and answers[0][0] <= cycle and open_()
            ctx.set(port.arready, ar_ready)
            ctx.set(port.awready, aw_ready)
            ctx.set(port.wready, w_ready)
            ctx.set(port.rvalid, r_valid)
            ctx.set(port.bvalid, b_valid)
            if r_valid:
                _, beat, left, _ = reads[0]
                ctx.set(port.rdata, self._beat(beat) if beat < beats else 0)
                ctx.set(port.rlast, left == 1)
            (_, _, arvalid, araddr, arlen, rready, awvalid, awaddr, awlen, wvalid, wdata, wstrb, wlast,
             bready, running) = await ctx.tick().sample(port.arvalid, port.araddr, port.arlen, port.rready,
                                                        port.awvalid, port.awaddr, port.awlen, port.wvalid,
                                                        port.wdata, port.wstrb, port.wlast, port.bready,
                                                        self.running)
            if cfg.memory != "ideal" and running and not was_running:
                dram, origin = DramTiming(cfg.memory, cfg.clock_mhz), cycle
            was_running = running
            for valid, ready, addr, length, channel in ((arvalid, ar_ready, araddr, arlen, "AR"),
                                                        (awvalid, aw_ready, awaddr, awlen, "AW")):
                if valid and ready and addr % AXI_PAGE_BYTES + (length + 1) * size > AXI_PAGE_BYTES:
                    raise AssertionError(f"AXI protocol: a {channel} burst of {length + 1} beats at byte {addr} "
                                         f"crosses a 4 KiB boundary")
            if arvalid and ar_ready:
                ready = dram.read(cycle - origin, araddr, arlen + 1, size) if dram is not None else None
                reads.append([cycle + cfg.ext_latency, araddr // size, arlen + 1, ready])
            if r_valid and rready:
                reads[0][1] += 1
                reads[0][2] -= 1
                if dram is not None:
                    reads[0][3].pop(0)
                if not reads[0][2]:
                    reads.popleft()
                if reads:                       # the next burst's first beat comes after this one
                    reads[0][0] = max(reads[0][0], cycle + 1)
            if awvalid and aw_ready:
                writes.append([awaddr // size, awlen + 1, [], cycle, awaddr])
            if wvalid and w_ready:
                beats_in.append((cycle, wdata, wstrb, bool(wlast)))
            self._match_w_beats(writes, beats_in, answers, dram, origin)
            if b_valid and bready:
                for beat, data, strobe in answers.popleft()[1]:
                    self._write(beat, data, strobe)
            cycle += 1
