"""Faults and host-protocol corner cases of the whole chip in pysim, against the reference machine.

* a synchronous reset in the middle of a program: the chip comes back idle with cleared status, and a full
  program afterwards behaves as the reference machine says, started from whatever the interrupted program
  left in the scratchpad and the external memory;
* back-to-back programs in one simulation, without reset: a program shares nothing with the previous one
  but the memories (scratchpad, external memory, and the instruction memory's stale words);
* programs without HALT: they fault (ILLEGAL on the zeroed word after them, or PC_OVERFLOW) identically in
  pysim and in the reference machine, which can never hang; a chip that cannot finish (an external memory
  that never answers) is stopped at the harness's cycle limit with ``HangError``.

The bench (``sim.testing.ChipBench``, also the pysim backend's) drives the chip the way a host does: through
``imem_we``/``start``/``done`` and the ``dbg_sp`` port, with an explicit ``sync`` domain whose reset the
testbench can assert.
"""

import pytest
from hypothesis import given, settings, strategies as hst

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ga2_hdl.ports import ExtSignature, ext_addr_width
from ga2_sw.asm import to_words
from ga2_sw.config import Config
from ga2_sw.cycles import Counters, cycle_counts
from ga2_sw.isa import Err, halt, ld, mm, rq, sm, st
from ga2_sw.machine import run
from sim.jobs import HangError
from sim.pysim_runner import run_pysim
from sim.testing import ChipBench, assert_same

CONFIG = Config(sp_words=256, ext_words=256, imem_words=16, sm_max_len=16)
EXT = [(i * 2654435761 + 12345) & 0xFFFFFFFF for i in range(CONFIG.ext_words)]
SP = [(i * 40503 + 7) & 0xFFFFFFFF for i in range(CONFIG.sp_words)]

# One instruction of every kind, about 220 cycles.
PROGRAM = [ld(0, 10, 40), mm(100, 0, 20, 2, 5, 3, 0, 5, 3, 3), rq(120, 100, 6, 1000, 9),
           sm(130, 40, 12), st(120, 200, 30), halt()]
# A second program that reads what the first one wrote (sp 100..141, ext 200..229).
PROGRAM_2 = [ld(50, 200, 20), rq(160, 100, 9, -777, 5), mm(180, 50, 60, 3, 4, 2, 1, 4, 4, 2),
             st(160, 0, 40), halt()]


# -- bench helpers -----------------------------------------------------------------------------------------

class DeadExtMemory(wiring.Component):
    """An external memory that never answers a read (``rvalid`` stays low) and drops writes."""

    def __init__(self, config):
        super().__init__({"port": In(ExtSignature(ext_addr_width(config)))})

    def elaborate(self, platform):
        return Module()


async def ticks(ctx, n):
    if n > 0:
        await ctx.tick().repeat(n)


def assert_idle_and_cleared(ctx, bench, what):
    chip = bench.chip
    assert not ctx.get(chip.host.running) and not ctx.get(chip.host.done), f"{what}: not idle"
    assert ctx.get(chip.host.error) == 0 and ctx.get(chip.host.pc) == 0, f"{what}: status not cleared"
    assert bench.counters(ctx) == Counters(), f"{what}: counters not cleared"
    assert not ctx.get(chip.ext.re) and not ctx.get(chip.ext.we), f"{what}: external access while idle"


TOTAL = cycle_counts(PROGRAM, CONFIG)[0].cycles
LIMIT = 20_000          # cycles a program here may run before the bench calls it a hang


def test_program_timeline():
    """The reset points below assume this program: every unit busy for a while, no fault."""
    r = run(PROGRAM, CONFIG, EXT, SP)
    assert r.ok and r.counters.cycles == TOTAL
    assert r.counters.mm and r.counters.dma and r.counters.vec


# -- reset in the middle of a program -------------------------------------------------------------------

# Running cycles (0: the FETCH cycle): fetch/decode/check of the first LD, inside the LD (reads in flight), the MM
# (operand feed and result writes), the RQ, the SM (divider pipeline full), the ST, the HALT, after done.
RESET_POINTS = [0, 1, 2, 3, 6, 20, 45, 60, 80, 95, 100, 115, 140, 170, 185, TOTAL - 1, TOTAL, TOTAL + 3]


@pytest.mark.parametrize("reset_at", RESET_POINTS)
def test_reset_mid_program(reset_at):
    bench = ChipBench(CONFIG, EXT)
    chip = bench.chip
    out = {}

    async def testbench(ctx):
        bench.poke_scratchpad(ctx, SP)
        await bench.load_program(ctx, PROGRAM)
        await bench.start_and_wait_running(ctx)
        await ticks(ctx, reset_at)
        out["running_before"] = ctx.get(chip.host.running)
        ctx.set(bench.cd.rst, 1)
        await ctx.tick()
        ctx.set(bench.cd.rst, 0)
        assert_idle_and_cleared(ctx, bench, f"after a reset at cycle {reset_at}")
        await ctx.tick().repeat(5)                   # reads in flight must not land after the reset
        assert_idle_and_cleared(ctx, bench, f"5 cycles after a reset at cycle {reset_at}")
        out["left"] = bench.memories(ctx)
        await bench.run_to_done(ctx, LIMIT)                  # the same program, still in instruction memory
        out["after"] = bench.result(ctx)
        out["host_sp"] = await bench.read_sp_via_host(ctx, range(96, 150))

    bench.simulate(testbench)
    assert out["running_before"] == (reset_at < TOTAL)
    sp_left, ext_left = out["left"]
    expect = run(PROGRAM, CONFIG, ext_left, sp_left)
    assert_same(expect, out["after"], f"program after a reset at cycle {reset_at}")
    assert out["after"].counters == cycle_counts(PROGRAM, CONFIG)[0]
    assert out["host_sp"] == expect.sp[96:150]


@pytest.mark.parametrize("reset_at, partial", [(60, False), (81, True)], ids=["mm-feed", "mm-writes"])
def test_reset_leaves_a_prefix_of_the_program(reset_at, partial):
    """What a reset leaves behind is the effect of the whole instructions before the interrupted one plus
    some of the interrupted one's writes: every word holds either its value after the earlier instructions
    or its value after the interrupted one. Running cycles 49..84 are the MM (LD: 3..46), which writes its
    six results in its last six cycles."""
    bench = ChipBench(CONFIG, EXT)
    out = {}

    async def testbench(ctx):
        bench.poke_scratchpad(ctx, SP)
        await bench.load_program(ctx, PROGRAM)
        await bench.start_and_wait_running(ctx)
        await ticks(ctx, reset_at)
        out["pc"] = ctx.get(bench.chip.host.pc)
        ctx.set(bench.cd.rst, 1)
        await ctx.tick()
        ctx.set(bench.cd.rst, 0)
        out["left"] = bench.memories(ctx)

    bench.simulate(testbench)
    assert out["pc"] == 1                              # the MM was executing
    before = run(PROGRAM[:1] + [halt()], CONFIG, EXT, SP)
    after = run(PROGRAM[:2] + [halt()], CONFIG, EXT, SP)
    sp_left, ext_left = out["left"]
    assert ext_left == before.ext
    assert all(w in (b, a) for w, b, a in zip(sp_left, before.sp, after.sp))
    assert (sp_left != before.sp) == partial and sp_left != after.sp


@settings(max_examples=6, deadline=None)
@given(reset_at=hst.integers(0, TOTAL + 8), second=hst.sampled_from(["same", "other"]))
def test_reset_anywhere_then_any_program(reset_at, second):
    """A reset in any running cycle, then a program (the same one, or another loaded after the reset)
    behaves as the reference machine says from the memories the reset left."""
    _reset_then_program(reset_at, second)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(reset_at=hst.integers(0, TOTAL + 8), second=hst.sampled_from(["same", "other"]))
def test_more_resets_anywhere_then_any_program(reset_at, second):
    """The same on more reset cycles (the default tier draws six)."""
    _reset_then_program(reset_at, second)


def _reset_then_program(reset_at, second):
    prog = PROGRAM if second == "same" else PROGRAM_2
    bench = ChipBench(CONFIG, EXT)
    out = {}

    async def testbench(ctx):
        bench.poke_scratchpad(ctx, SP)
        await bench.load_program(ctx, PROGRAM)
        await bench.start_and_wait_running(ctx)
        await ticks(ctx, reset_at)
        ctx.set(bench.cd.rst, 1)
        await ctx.tick()
        ctx.set(bench.cd.rst, 0)
        assert_idle_and_cleared(ctx, bench, f"after a reset at cycle {reset_at}")
        if second == "other":
            await bench.load_program(ctx, PROGRAM_2)
        out["left"] = bench.memories(ctx)
        await bench.run_to_done(ctx, LIMIT)
        out["after"] = bench.result(ctx)

    bench.simulate(testbench)
    sp_left, ext_left = out["left"]
    image = to_words(prog) + to_words(PROGRAM)[len(prog):]
    assert_same(run(image, CONFIG, ext_left, sp_left), out["after"], f"{second} program after a reset")


def test_reset_during_program_load():
    """Overwrite a legal word with an out-of-range one and reset the chip in the next cycle: the new word
    must still fault (SP_RANGE) and write nothing, as the reference machine says."""
    good, bad = ld(0, 0, 7), ld(250, 0, 7)              # bad touches sp 250..256: SP_RANGE
    bench = ChipBench(CONFIG, EXT)
    out = {}

    async def testbench(ctx):
        bench.poke_scratchpad(ctx, SP)
        await bench.load_program(ctx, [good, halt()])
        await ticks(ctx, 4)                              # good's code is in the error memory
        await bench.load_program(ctx, [bad])
        ctx.set(bench.cd.rst, 1)                          # while bad's code is in the checker pipeline
        await ctx.tick()
        ctx.set(bench.cd.rst, 0)
        await ticks(ctx, 4)
        await bench.run_to_done(ctx, LIMIT)
        out["after"] = bench.result(ctx)

    bench.simulate(testbench)
    expect = run([bad, halt()], CONFIG, EXT, SP)
    assert expect.error == Err.SP_RANGE
    assert_same(expect, out["after"], "a word loaded just before a reset")


# -- back-to-back programs ---------------------------------------------------------------------------------

FAULTY = [ld(0, 10, 40), st(0, 250, 7), halt()]            # EXT_RANGE at pc 1


@pytest.mark.parametrize("first, second", [
    (PROGRAM, PROGRAM_2),
    (FAULTY, PROGRAM_2),
    (PROGRAM, FAULTY),
    (PROGRAM_2, PROGRAM_2),
], ids=["ok-ok", "fault-ok", "ok-fault", "same-twice"])
def test_back_to_back_programs(first, second):
    bench = ChipBench(CONFIG, EXT)
    chip = bench.chip
    out = {}

    async def testbench(ctx):
        bench.poke_scratchpad(ctx, SP)
        await bench.load_program(ctx, first)
        await bench.run_to_done(ctx, LIMIT)
        out["first"] = bench.result(ctx)
        await ctx.tick().repeat(3)                     # the host takes its time; done and error hold
        assert ctx.get(chip.host.done) and Err(ctx.get(chip.host.error)) == out["first"].error
        await bench.load_program(ctx, second)           # no reset in between
        await bench.run_to_done(ctx, LIMIT)
        out["second"] = bench.result(ctx)

    bench.simulate(testbench)
    r1 = run(first, CONFIG, EXT, SP)
    assert_same(r1, out["first"], "first program")
    # The second program starts from the first one's memories and from nothing else: its counters are
    # its own (cycle_counts), not a continuation; a fault of the first one is forgotten.
    image = to_words(second) + to_words(first)[len(second):]      # stale words past the second's HALT
    r2 = run(image, CONFIG, r1.ext, r1.sp)
    assert_same(r2, out["second"], "second program")
    assert out["second"].counters == cycle_counts(second, CONFIG)[0]
    assert r2.counters == run(second, CONFIG, r1.ext, r1.sp).counters


def test_stale_instruction_memory_is_state():
    """The instruction memory is memory too: a second, shorter program without HALT runs on into the
    first program's leftover words, exactly as the reference machine given the whole image does."""
    first = [ld(0, 10, 8), ld(8, 20, 8), st(0, 100, 4), halt()]
    second = [ld(40, 30, 5)]                               # no HALT: continues with first[1:]
    bench = ChipBench(CONFIG, EXT)
    out = {}

    async def testbench(ctx):
        await bench.load_program(ctx, first)
        await bench.run_to_done(ctx, LIMIT)
        await bench.load_program(ctx, second)
        await bench.run_to_done(ctx, LIMIT)
        out["second"] = bench.result(ctx)

    bench.simulate(testbench)
    r1 = run(first, CONFIG, EXT)
    expect = run(to_words(second) + to_words(first)[1:], CONFIG, r1.ext, r1.sp)
    assert_same(expect, out["second"], "second program over stale words")
    assert expect.ok and expect.counters.instructions == 4
    # Given only its own words (zero-filled instruction memory), the same program faults instead.
    assert run(second, CONFIG, r1.ext, r1.sp).error == Err.ILLEGAL


# -- programs without HALT, hangs and the cycle limit -------------------------------------------------------

def test_missing_halt_faults_like_the_machine():
    """Without HALT the zeroed word after the program is opcode 0: ILLEGAL at pc = len(program), after the
    program ran, in pysim, in the reference machine and in the cycle model."""
    prog = PROGRAM[:-1]
    r = run_pysim(CONFIG, prog, EXT, SP)
    expect = run(prog, CONFIG, EXT, SP)
    assert_same(expect, r, "program without HALT")
    assert r.error == Err.ILLEGAL and r.pc == len(prog)
    assert r.counters.instructions == len(prog)
    assert cycle_counts(prog, CONFIG)[:2] == (r.counters, Err.ILLEGAL)


def test_full_instruction_memory_without_halt_overflows():
    config = CONFIG.replace(imem_words=3)
    prog = [ld(0, 0, 4), st(0, 4, 4), ld(8, 4, 4)]
    r = run_pysim(config, prog, EXT)
    expect = run(prog, config, EXT)
    assert_same(expect, r, "full instruction memory")
    assert r.error == Err.PC_OVERFLOW and r.pc == config.imem_words and r.counters.instructions == 3


def test_machine_cannot_hang():
    """The reference machine needs no cycle limit: without branches it visits each instruction-memory word at
    most once, so it stops after at most imem_words + 1 issue slots, here on PC_OVERFLOW."""
    config = CONFIG.replace(imem_words=64)
    r = run([ld(0, 0, 1)] * 64, config, EXT)
    assert r.error == Err.PC_OVERFLOW and r.counters.instructions == 64


def test_cycle_limit_raises_hang_error():
    """run_pysim stops a program that has not halted by its cycle limit with a clear HangError."""
    limit = TOTAL // 2
    with pytest.raises(HangError, match=rf"did not halt within {limit:,} cycles \(pc=\d+, cycles counter=\d+\)"):
        run_pysim(CONFIG, PROGRAM, EXT, SP, cycle_limit=limit)
    r = run_pysim(CONFIG, PROGRAM, EXT, SP, cycle_limit=TOTAL + 64)      # enough: no error
    assert r.ok and r.counters.cycles == TOTAL


def test_dead_external_memory_hangs_until_the_limit():
    """A real hang: an external memory that never answers leaves LD waiting for its data. The chip stays
    busy in the LD (pc 0, DMA busy every cycle after the issue cycles) and the harness's cycle limit ends
    the run with HangError; nothing is written."""
    bench = ChipBench(CONFIG, extmem=DeadExtMemory(CONFIG))
    chip = bench.chip
    out = {}

    async def testbench(ctx):
        bench.poke_scratchpad(ctx, SP)
        await bench.load_program(ctx, PROGRAM)
        with pytest.raises(HangError, match=r"did not halt within 300 cycles \(pc=0, cycles counter=300\)"):
            await bench.run_to_done(ctx, 300)
        out["counters"] = bench.counters(ctx)
        out["running"] = ctx.get(chip.host.running)
        out["re"] = ctx.get(chip.ext.re)
        out["sp"] = [ctx.get(chip.scratchpad.cell(i)) for i in range(CONFIG.sp_words)]

    bench.simulate(testbench)
    assert out["running"] and not out["re"]            # all 40 reads issued long ago; waiting for data
    # The bench counts the running cycles from the first (FETCH) and stops at the limit, where the chip's cycles
    # counter shows the same 300; DMA busy from the 4th on.
    assert out["counters"] == Counters(cycles=300, mm=0, dma=300 - 3, vec=0, instructions=0)
    assert out["sp"] == SP
