"""An AXI4 subordinate memory for pysim: the bare port's ideal memory behind AXI4 handshakes, or the same with
random pauses on every channel (docs/ARCHITECTURE.md, "The AXI4 port")."""

import random
from collections import deque

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
    WLAST on the wrong beat fails the run (AssertionError naming the rule)."""

    def __init__(self, config, init=(), *, pause=0.0, seed=0):
        self._config, self.pause, self._seed = config, pause, seed
        self._elements = held_image(init, config)
        self._elements += [0] * (config.ext_words - len(self._elements))
        self.port = None

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

    async def run(self, ctx):
        port, cfg = self.port, self._config
        rng = random.Random(self._seed)
        size = beat_bytes(cfg)
        beats = cfg.ext_words // cfg.bus_bytes
        # [first cycle, beat, left]; [beat, left, beats written, AW's cycle]; W beats not yet matched to an
        # AW (a subordinate may take W first); [cycle B is due, the burst's beats]
        reads, writes, beats_in, answers = deque(), deque(), deque(), deque()
        cycle = 0

        def open_():
            return not (self.pause and rng.random() < self.pause)

        ctx.set(port.rresp, 0)
        ctx.set(port.bresp, 0)
        while True:
            ar_ready, aw_ready, w_ready = open_(), open_(), open_()
            r_valid = bool(reads) and reads[0][0] <= cycle and open_()
            b_valid = bool(answers) and answers[0][0] <= cycle and open_()
            ctx.set(port.arready, ar_ready)
            ctx.set(port.awready, aw_ready)
            ctx.set(port.wready, w_ready)
            ctx.set(port.rvalid, r_valid)
            ctx.set(port.bvalid, b_valid)
            if r_valid:
                _, beat, left = reads[0]
                ctx.set(port.rdata, self._beat(beat) if beat < beats else 0)
                ctx.set(port.rlast, left == 1)
            (_, _, arvalid, araddr, arlen, rready, awvalid, awaddr, awlen, wvalid, wdata, wstrb, wlast,
             bready) = await ctx.tick().sample(port.arvalid, port.araddr, port.arlen, port.rready, port.awvalid,
                                               port.awaddr, port.awlen, port.wvalid, port.wdata, port.wstrb,
                                               port.wlast, port.bready)
            for valid, ready, addr, length, channel in ((arvalid, ar_ready, araddr, arlen, "AR"),
                                                        (awvalid, aw_ready, awaddr, awlen, "AW")):
                if valid and ready and addr % AXI_PAGE_BYTES + (length + 1) * size > AXI_PAGE_BYTES:
                    raise AssertionError(f"AXI protocol: a {channel} burst of {length + 1} beats at byte {addr} "
                                         f"crosses a 4 KiB boundary")
            if arvalid and ar_ready:
                reads.append([cycle + cfg.ext_latency, araddr // size, arlen + 1])
            if r_valid and rready:
                reads[0][1] += 1
                reads[0][2] -= 1
                if not reads[0][2]:
                    reads.popleft()
                if reads:                       # the next burst's first beat comes after this one
                    reads[0][0] = max(reads[0][0], cycle + 1)
            if awvalid and aw_ready:
                writes.append([awaddr // size, awlen + 1, [], cycle])
            if wvalid and w_ready:
                beats_in.append((cycle, wdata, wstrb, bool(wlast)))
            while writes and beats_in:          # each W beat belongs to the oldest burst still short of beats
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
                    answers.append((max(taken, burst[3]) + cfg.ext_write_latency, writes.popleft()[2]))
            if b_valid and bready:
                for beat, data, strobe in answers.popleft()[1]:
                    self._write(beat, data, strobe)
            cycle += 1
