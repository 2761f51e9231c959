"""Simulation helpers for unit testbenches: a unit wired to a real scratchpad, and a start/wait helper."""

import os

from amaranth.hdl import Elaboratable, Module
from amaranth.lib.wiring import connect
from amaranth.sim import Simulator

from ga2_hdl.scratchpad import Scratchpad
from ga2_sw.timing import SP_WRITE_DELAY

__all__ = ["UnitBench", "run_bench", "start_and_wait"]


class UnitBench(Elaboratable):
    """An execution unit whose scratchpad ports are connected to a Scratchpad with initial contents."""

    def __init__(self, unit, config, sp_init=()):
        self.unit = unit
        self.sp = Scratchpad(config, init=sp_init, reads={f"rd{n}": 1 for n in range(len(unit.read_ports))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = self.unit
        m.submodules.sp = self.sp
        for n, port in enumerate(self.unit.read_ports):
            connect(m, port, self.sp.read_group(f"rd{n}")[0])
        connect(m, self.unit.sp_wr, self.sp.write_group("shared")[0])
        return m


def run_bench(dut, *testbenches, vcd_name=None):
    """Run testbenches on a 100 MHz clock; a VCD is written only when $GA2_VCD is set."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in testbenches:
        sim.add_testbench(tb)
    if os.getenv("GA2_VCD") and vcd_name:
        with sim.write_vcd(f"{vcd_name}.vcd"):
            sim.run()
    else:
        sim.run()


async def start_and_wait(ctx, unit, instr_value, limit=100000):
    """Pulse ``start`` with the instruction (an int, the 128-bit word) and return the number of cycles
    ``busy`` was high, checking that ``done`` rises exactly in the last busy cycle. Returns once the unit's
    last write has reached the scratchpad."""
    ctl = unit.ctl
    ctx.set(ctl.instr.as_value(), instr_value)
    ctx.set(ctl.start, 1)
    await ctx.tick()
    ctx.set(ctl.start, 0)
    busy_cycles = 0
    for _ in range(limit):
        busy, done = ctx.get(ctl.busy), ctx.get(ctl.done)
        if not busy:
            assert not done, "done is high while busy is low"
            break
        busy_cycles += 1
        await ctx.tick()
        if done:
            assert not ctx.get(ctl.busy), "busy stays high after done"
            break
    else:
        raise AssertionError(f"unit still busy after {limit} cycles")
    await ctx.tick().repeat(SP_WRITE_DELAY)     # the last write request reaches the memory
    return busy_cycles
