"""Run GA-2 programs on the Amaranth RTL in Amaranth's Python simulator (pysim)."""

import time

from amaranth.hdl import Elaboratable, Module
from amaranth.lib.wiring import connect
from amaranth.sim import Simulator

from ga2_hdl.top import GA2
from ga2_sw.cycles import Counters
from ga2_sw.isa import Err, Instr, encode
from ga2_sw.machine import Result

from .extmem import ExtMemoryModel

__all__ = ["PysimRunner", "run_pysim", "HangError"]


class HangError(RuntimeError):
    """The program did not halt within the cycle limit."""


class _Harness(Elaboratable):
    def __init__(self, config, ext):
        self.chip = GA2(config)
        self.extmem = ExtMemoryModel(config, init=ext)

    def elaborate(self, platform):
        m = Module()
        m.submodules.chip = self.chip
        m.submodules.extmem = self.extmem
        connect(m, self.chip.ext, self.extmem.port)
        return m


def _check_image(words, size, what):
    words = list(words or [])
    if len(words) > size:
        raise ValueError(f"{what} image has {len(words)} words but the memory holds {size}")
    return words


def run_pysim(config, program, ext=None, sp=None, cycle_limit=2_000_000, vcd=None):
    """Run one program to HALT (or a fault) and return a ``ga2_sw.machine.Result`` plus timing attributes
    ``sim_cycles`` (clock cycles simulated, program loading excluded) and ``seconds`` (wall time)."""
    words = [encode(p) if isinstance(p, Instr) else p for p in program]
    if len(words) > config.imem_words:
        raise ValueError(f"Program has {len(words)} instructions but instruction memory holds {config.imem_words}")
    ext = _check_image(ext, config.ext_words, "External memory")
    sp = _check_image(sp, config.sp_words, "Scratchpad")
    harness = _Harness(config, ext)
    chip = harness.chip
    out = {}

    async def testbench(ctx):
        # The program goes in through the host port, where each word is validated as it is written; the
        # scratchpad is loaded directly (no cycles).
        for addr, word in enumerate(words):
            ctx.set(chip.host.imem_we, 1)
            ctx.set(chip.host.imem_addr, addr)
            ctx.set(chip.host.imem_data, word)
            await ctx.tick()
        ctx.set(chip.host.imem_we, 0)
        for addr, word in enumerate(sp):
            ctx.set(chip.scratchpad.mem.data[addr], word)
        ctx.set(chip.host.start, 1)
        await ctx.tick()
        ctx.set(chip.host.start, 0)
        simulated = 1
        while not ctx.get(chip.host.done):
            if simulated >= cycle_limit:
                raise HangError(f"program did not halt within {cycle_limit:,} cycles "
                                f"(pc={ctx.get(chip.host.pc)}, cycles counter={ctx.get(chip.host.cycles)})")
            step = 64
            await ctx.tick().repeat(step)
            simulated += step
        out["counters"] = Counters(ctx.get(chip.host.cycles), ctx.get(chip.host.mm_cycles), ctx.get(chip.host.dma_cycles),
                                   ctx.get(chip.host.vec_cycles), ctx.get(chip.host.instructions))
        out["error"], out["pc"] = Err(ctx.get(chip.host.error)), ctx.get(chip.host.pc)
        out["ext"] = [ctx.get(harness.extmem.mem.data[i]) for i in range(config.ext_words)]
        out["sp"] = [ctx.get(chip.scratchpad.mem.data[i]) for i in range(config.sp_words)]
        out["sim_cycles"] = simulated

    sim = Simulator(harness)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    t0 = time.perf_counter()
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    result = Result(out["ext"], out["sp"], out["counters"], out["error"], out["pc"])
    result.sim_cycles = out["sim_cycles"]
    result.seconds = time.perf_counter() - t0
    return result


class PysimRunner:
    """A ``runner(program, ext) -> ext`` for ``ga2_sw.check.check_batching``, on pysim."""

    def __init__(self, config, cycle_limit=2_000_000):
        self.config, self.cycle_limit = config, cycle_limit

    def __call__(self, program, ext):
        r = run_pysim(self.config, program, ext, cycle_limit=self.cycle_limit)
        if not r.ok:
            raise RuntimeError(f"program faulted with {r.error.name} at pc {r.pc}")
        return r.ext
