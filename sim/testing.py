"""Simulation benches and test helpers: a unit wired to a real scratchpad (``UnitBench``, ``start_and_wait``),
the whole chip with an external memory driven as a host drives it (``ChipBench``: the pysim backend's bench and
the fault tests'), ``assert_same`` on two runs, and ``unit_verilog`` for the units' Verilog tests."""

import gc
import os
import re

from amaranth.back import verilog
from amaranth.hdl import ClockDomain, Elaboratable, Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import connect
from amaranth.sim import Simulator

from ga2_hdl.memory.banked_scratchpad import BankedScratchpad
from ga2_hdl.ports import COUNTERS
from ga2_hdl.memory.scratchpad import Scratchpad
from ga2_sw.asm import to_words
from ga2_sw.cycles import Counters
from ga2_sw.isa import Err
from ga2_sw.machine import Result
from ga2_sw.timing import SP_WRITE_DELAY, debug_read_latency

from .compare import compare_results
from .axi_mem import AxiMemoryModel
from .extmem import ExtMemoryModel
from .jobs import DEFAULT_CYCLE_LIMIT, HangError, hang_message

__all__ = ["arbitrated_rounds", "UnitBench", "simulate", "run_bench", "start_and_wait", "ChipBench", "assert_same",
           "unit_verilog", "verilog_ports", "assert_build_refused"]


def arbitrated_rounds(addresses, bank_of):
    """The cycle, counted from 0, in which each of one slice's operands is read, worked out as the decoupled
    matrix unit arbitrates (an independent reference for ``ga2_sw.banking.slice_rounds``): in each cycle every
    operand still to read is read unless an earlier one still to read is on its bank."""
    rounds, left, cycle = [None] * len(addresses), list(range(len(addresses))), 0
    while left:
        taken = set()
        for p in list(left):
            if bank_of(addresses[p]) not in taken:
                rounds[p] = cycle
                left.remove(p)
            taken.add(bank_of(addresses[p]))
        cycle += 1
    return rounds


class UnitBench(Elaboratable):
    """An execution unit whose scratchpad ports are connected to a scratchpad with initial contents: the
    one-memory Scratchpad in order, and decoupled a BankedScratchpad whose port B serves the unit as the chip's
    serves its lane (registered read requests and data, one access per bank a cycle; a vector-lane unit's requests
    through the announce register)."""

    def __init__(self, unit, config, sp_init=()):
        from ga2_hdl.top import UNIT_CLASSES, scratchpad_parameters
        from ga2_sw.isa import OPS, unit_ops
        self.unit = unit
        reads = {f"rd{n}": 1 for n in range(len(unit.read_ports))}
        name = next(n for n, cls in UNIT_CLASSES.items() if isinstance(unit, cls))
        first = tuple(reads) + ("shared",) if OPS[unit_ops(name)[0]].lane == "vector" else ()
        sizes = scratchpad_parameters(config)
        self.sp = (BankedScratchpad(**sizes, init=sp_init, reads=reads, writes={"shared": 1}, first=first)
                   if config.decoupled else Scratchpad(**sizes, init=sp_init, reads=reads))

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = self.unit
        m.submodules.sp = self.sp
        for n, port in enumerate(self.unit.read_ports):
            connect(m, port, self.sp.read_group(f"rd{n}")[0])
        connect(m, self.unit.sp_wr, self.sp.write_group("shared")[0])
        return m


def simulate(dut, *testbenches, vcd=None, background=()):
    """Run testbenches on a 100 MHz clock, writing a waveform to the path ``vcd`` when given; the
    ``background`` ones (models that never finish) run beside them."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in testbenches:
        sim.add_testbench(tb)
    for tb in background:
        sim.add_testbench(tb, background=True)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()


def run_bench(dut, *testbenches, vcd_name=None):
    """Run testbenches on a 100 MHz clock; a VCD is written only when $GA2_VCD is set."""
    simulate(dut, *testbenches, vcd=f"{vcd_name}.vcd" if os.getenv("GA2_VCD") and vcd_name else None)


async def start_and_wait(ctx, unit, instr_value, limit=100000):
    """Pulse ``start`` with the instruction (an int, the 128-bit word) and return the number of cycles the unit
    was ``busy`` or ``draining``, checking that ``done`` rises exactly in the last busy cycle and that draining
    follows busy without a gap. Returns once the unit's last write has reached the scratchpad."""
    ctl = unit.ctl
    ctx.set(ctl.instr.as_value(), instr_value)
    ctx.set(ctl.start, 1)
    await ctx.tick()
    ctx.set(ctl.start, 0)
    busy_cycles, was_busy = 0, True
    for _ in range(limit):
        busy, done, draining = ctx.get(ctl.busy), ctx.get(ctl.done), ctx.get(ctl.draining)
        assert not done or busy, "done is high while busy is low"
        assert busy == was_busy, "busy comes back after done" if busy else "busy falls without done"
        if not (busy or draining):
            break
        busy_cycles += 1
        was_busy = busy and not done
        await ctx.tick()
    else:
        raise AssertionError(f"unit still busy after {limit} cycles")
    await ctx.tick().repeat(SP_WRITE_DELAY)     # the last write request reaches the memory
    return busy_cycles


# -- the whole chip ----------------------------------------------------------------------------------------

class ChipBench(Elaboratable):
    """GA2 with an external memory (``ExtMemoryModel`` holding ``ext``, or the component ``extmem``, which
    needs a ``port`` of ``ExtSignature``), in an explicit ``sync`` domain so that a testbench can drive its
    reset (``ctx.set(bench.cd.rst, 1)``; the implicit domain's ``ResetSignal`` cannot be assigned).

    The async methods drive the chip the way a host does: programs through ``imem_we``, a ``start`` pulse,
    ``done``; the scratchpad is set and read directly (it has no host write port) or through ``dbg_sp``."""

    def __init__(self, config, ext=(), extmem=None):
        self.config = config
        from ga2_hdl.top import GA2
        self.cd = ClockDomain("sync")
        self.chip = GA2(config)
        if extmem is None:
            extmem = AxiMemoryModel(config, init=list(ext)) if config.axi else ExtMemoryModel(config, init=list(ext))
        self.extmem = extmem
        if isinstance(extmem, AxiMemoryModel):     # a behavioural model, run beside the testbenches
            extmem.port, extmem.running = self.chip.ext, self.chip.host.running

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = self.cd
        m.submodules.chip = self.chip
        if not isinstance(self.extmem, AxiMemoryModel):
            m.submodules.extmem = self.extmem
            connect(m, self.chip.ext, self.extmem.port)
        return m

    def simulate(self, *testbenches, vcd=None):
        """Run the testbenches on a 100 MHz clock, writing a waveform to ``vcd`` when given."""
        simulate(self, *testbenches, vcd=vcd,
                 background=[self.extmem.run] if isinstance(self.extmem, AxiMemoryModel) else ())

    async def load_program(self, ctx, program):
        """Write a program (Instr objects or words) through the host port, one word per cycle."""
        host = self.chip.host
        for addr, word in enumerate(to_words(program)):
            ctx.set(host.imem_we, 1)
            ctx.set(host.imem_addr, addr)
            ctx.set(host.imem_data, word)
            await ctx.tick()
        ctx.set(host.imem_we, 0)

    def poke_scratchpad(self, ctx, sp):
        """Set scratchpad words directly (no cycles spent). Programs always go in through the host port: the
        sequencer validates each word as it is written, so poking the instruction memory would bypass that."""
        for addr, word in enumerate(sp):
            ctx.set(self.chip.scratchpad.cell(addr), word)

    async def start(self, ctx):
        ctx.set(self.chip.host.start, 1)
        await ctx.tick()
        ctx.set(self.chip.host.start, 0)

    async def start_and_wait_running(self, ctx, limit=16):
        """Pulse start and return in the first cycle the chip runs (FETCH); the sequencer may hold a start
        while it is still validating the last words written."""
        await self.start(ctx)
        for _ in range(limit):
            if ctx.get(self.chip.host.running):
                return
            await ctx.tick()
        raise AssertionError(f"the chip did not start running within {limit} cycles of start")

    async def run_to_done(self, ctx, cycle_limit=DEFAULT_CYCLE_LIMIT, *, wait_running=True, step=1,
                          on_hang="raise"):
        """Start the program in instruction memory and clock until ``done``; return the cycles counted.

        With ``wait_running`` the count starts at the chip's first running cycle: ``done`` of a previous
        program stays high until the sequencer takes the start, which it may hold for a few cycles after the
        last instruction-memory write. Without, it starts at 1 with the start pulse's cycle (a fresh chip).
        ``done`` is sampled every ``step`` cycles; once the count reaches ``cycle_limit`` without it, the run
        raises ``HangError``, or with ``on_hang="return"`` returns the count (``done`` is then low)."""
        host = self.chip.host
        if wait_running:
            await self.start_and_wait_running(ctx)
            count = 0
        else:
            await self.start(ctx)
            count = 1
        while not ctx.get(host.done):
            if count >= cycle_limit:
                if on_hang == "return":
                    break
                raise HangError(hang_message(cycle_limit, ctx.get(host.pc), ctx.get(host.cycles)))
            if step == 1:
                await ctx.tick()
            else:
                await ctx.tick().repeat(step)
            count += step
        # One more edge (the count is unchanged) and both memories are final for ``memories``' direct reads: the
        # vector lane's last write leaves its announce register in the cycle in which `done` rises and reaches the
        # bank at that cycle's edge (the host's debug reads, a cycle later at least, see it anyway), and the AXI
        # model applies a cycle's handshakes (the last write's answer on B among them) after the edge, beside
        # this testbench.
        await ctx.tick()
        return count

    def counters(self, ctx):
        host = self.chip.host
        return Counters(*(ctx.get(getattr(host, name)) for name in COUNTERS))

    def memories(self, ctx):
        """(scratchpad, external memory) contents, read directly."""
        sp = [ctx.get(self.chip.scratchpad.cell(i)) for i in range(self.config.sp_words)]
        ext = self.extmem.elements(ctx)
        return sp, ext

    def result(self, ctx):
        """The chip's state as a ``ga2_sw.machine.Result``: memories, counters, error and pc. Raises
        AssertionError if the banked scratchpad saw a bank or word collision (``BankedScratchpad.collided``)."""
        collided = getattr(self.chip.scratchpad, "collided", None)
        if collided is not None and ctx.get(collided):
            raise AssertionError("the banked scratchpad saw two accesses collide on a bank or a word")
        sp, ext = self.memories(ctx)
        host = self.chip.host
        return Result(ext, sp, self.counters(ctx), Err(ctx.get(host.error)), ctx.get(host.pc))

    async def read_sp_via_host(self, ctx, addrs):
        """Read scratchpad words through the debug port (data ``debug_read_latency`` cycles after the address, a
        new address every cycle)."""
        addrs, out, latency = list(addrs), [], debug_read_latency(self.config)
        for n in range(len(addrs) + latency - 1):
            if n < len(addrs):
                ctx.set(self.chip.debug.addr, addrs[n])
            await ctx.tick()
            if n + 1 >= latency:
                out.append(ctx.get(self.chip.debug.data))
        return out


def assert_same(ref, got, what, check_sp=True):
    """Fail with the readable differences (``sim.compare.compare_results``) when two runs differ."""
    diffs = compare_results(ref, got, check_sp=check_sp)
    assert not diffs, f"{what}:\n" + "\n".join(diffs)


# -- the units' Verilog ------------------------------------------------------------------------------------

_PORT = re.compile(r"^\s*(input|output)\s*(?:\[(\d+):0\])?\s*\\?([A-Za-z_][\w$]*)\s*;", re.M)


def verilog_ports(text, module):
    """``{name: (direction, width)}`` of the ports of ``module`` in Verilog ``text``, and the header's names in
    order; AssertionError when the module is not there."""
    head = re.search(rf"^module \\?{re.escape(module)}\((.*?)\);", text, re.M | re.S)
    assert head, f"no module {module!r} in the Verilog"
    order = [n.strip().lstrip("\\") for n in head.group(1).split(",") if n.strip()]
    body = text[head.end():text.index("endmodule", head.end())]
    ports = {name: (d, int(msb) + 1 if msb else 1) for d, msb, name in _PORT.findall(body)}
    return ports, order


def unit_verilog(make, name):
    """The Verilog of the component ``make()`` as top module ``name``, checked and returned: converting a second,
    fresh instance gives the same text; the top declares exactly the component's ports (``clk``, ``rst`` and
    one per signature member, ``path__member``, with its direction and width); and, when Verilator is
    installed, it lints clean with the project's waivers (``sim.verilator.lint``)."""
    def convert(unit):
        return verilog.convert(unit, name=name, emit_src=False, strip_internal_attrs=True)
    unit = make()
    text = convert(unit)
    assert text == convert(make()), f"{name}: two conversions of the same unit differ"
    ports, order = verilog_ports(text, name)
    assert sorted(order) == sorted(ports), f"{name}: header {order} against declarations {sorted(ports)}"
    expect = {"clk": ("input", 1), "rst": ("input", 1)}
    for path, member, value in unit.signature.flatten(unit):
        direction = "input" if member.flow == wiring.In else "output"
        expect["__".join(map(str, path))] = (direction, len(Value.cast(value)))
    assert ports == expect, f"{name}: ports {ports} != signature {expect}"
    from .verilator import find_verilator, lint
    if find_verilator() is not None:
        ok, output = lint(verilog=text, top=name)
        assert ok, f"{name}: Verilator lint:\n{output}"
    return text


def assert_build_refused(make, message):
    """Converting ``make()`` to Verilog stops with an AssertionError saying exactly ``message``: a unit checks at
    elaboration what it assumes of the cycle model. The half-built modules are collected at once, so that their
    "never used" warnings fall under the calling test's warning filter."""
    try:
        verilog.convert(make(), name="dut")
    except AssertionError as exc:
        assert str(exc) == message, f"the build was refused with {str(exc)!r}, not {message!r}"
    else:
        raise AssertionError(f"the build was not refused; expected: {message}")
    finally:
        gc.collect()
