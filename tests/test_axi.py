"""The AXI4 port (``Config.axi = 1``, ga2_hdl/dma/axi_dma.py; docs/ARCHITECTURE.md "The AXI4 port").

Three subordinates: the project's ideal one in pysim (sim/axi_mem.py) and in the Verilator harness, with which
the counters must equal the cycle model exactly; the same with random pauses on every channel, with which the
memories, error and pc must still be the reference machine's (the counters only grow); and cocotbext-axi's
``AxiRam`` (nobody here wrote it) through cocotb on Verilator, with and without pauses. ``-m axi`` selects the
AxiRam runs, the long one (1,000 random programs under random backpressure) included; the default test
command runs a representative part."""

import os
import random

import pytest

from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.isa import halt, ld, st
from ga2_sw.machine import run
from ga2_sw.packing import bursts
from ga2_sw.timing import debug_read_latency

from sim.axi_cocotb import axiram_unavailable, run_axiram
from sim.backends import get_backend
from sim.compare import compare_results, format_program
from sim.random_programs import FAULT_KINDS, FUZZ_CONFIG, cycle_limit_for, fuzz_job, random_program, random_words

# The AXI chips: in order (a 32-bit word a beat), decoupled, decoupled with 4 and 16 bytes a beat; external
# memories of two 4 KiB pages or more, so that bursts meet the page rule.
AXI_BASE = FUZZ_CONFIG.replace(axi=1, ext_words=8192)
AXI = {
    "inorder": AXI_BASE,
    "decoupled": AXI_BASE.replace(mode="decoupled"),
    "packed-4": AXI_BASE.replace(mode="decoupled", bus_bytes=4),
    "packed-16": AXI_BASE.replace(mode="decoupled", bus_bytes=16, sp_banks=32),
    # Writes answered five cycles after their last beat: loads that meet them and HALTs wait (ExternalPort).
    "inorder-slow-b": AXI_BASE.replace(ext_write_latency=5),
    "packed-4-slow-b": AXI_BASE.replace(mode="decoupled", bus_bytes=4, ext_write_latency=5),
}
# AxiRam answers a read burst two cycles after taking it and a write burst two cycles after its last beat: with
# ext_latency 2 and ext_write_latency 2 the cycle model is its timing.
AXIRAM = FUZZ_CONFIG.replace(axi=1, mode="decoupled", bus_bytes=4, ext_latency=2, ext_write_latency=2)
AXIRAM_WORDS = FUZZ_CONFIG.replace(axi=1, ext_latency=2, ext_write_latency=2, ext_words=2048)

needs_verilator = pytest.mark.skipif(not get_backend("verilator").available(), reason="Verilator not installed")
needs_axiram = pytest.mark.skipif(axiram_unavailable() is not None, reason=f"{axiram_unavailable()}")


def test_bursts_split_at_256_beats_and_4_kib():
    words, packed16 = Config(axi=1), AXI["packed-16"]
    assert bursts(0, 300, words) == [(0, 256), (256, 44)]
    assert bursts(1020, 9, words) == [(1020, 4), (1024, 5)]                 # 4 KiB = 1,024 words
    assert bursts(4090, 20, packed16) == [(255, 1), (256, 1)]              # 4 KiB = 256 beats of 16 bytes
    assert bursts(4000, 5000, packed16) == [(250, 6), (256, 256), (512, 51)]
    for config in (words, packed16):
        for x, n in ((3, 5000), (4095, 1), (100, 4096)):
            parts = bursts(x, n, config)
            size = 4 if config.bus_bytes == 1 else config.bus_bytes
            assert all(1 <= k <= 256 and (b * size) // 4096 == ((b + k) * size - 1) // 4096 for b, k in parts)
            assert [b for b, _ in parts][1:] == [b + k for b, k in parts][:-1]


def _pysim(config, program, ext, pause=0.0, seed=0):
    from sim.axi_mem import AxiMemoryModel
    from sim.testing import ChipBench
    bench = ChipBench(config, extmem=AxiMemoryModel(config, ext, pause=pause, seed=seed))
    out = {}

    async def testbench(ctx):
        await bench.load_program(ctx, program)
        await bench.run_to_done(ctx, 20_000)
        out["result"] = bench.result(ctx)
    bench.simulate(testbench)
    return out["result"]


@pytest.mark.parametrize("name", ["inorder", "packed-4"])
def test_pysim_ideal_and_paused(name):
    """Bursts across 4 KiB, an ST read back, partial beats: exact counters with the ideal subordinate, the same
    memories under pauses."""
    config = AXI[name].replace(ext_words=2048)
    rng = random.Random(5)
    ext = [rng.randrange(1 << 32) for _ in range(2048)]
    program = [ld(0, 3, 13), ld(20, 1020, 9), st(0, 1030, 13), ld(60, 1030, 13), st(60, 2040, 8), halt()]
    want = run(program, config, ext)
    got = _pysim(config, program, ext)
    assert not compare_results(want, got)
    paused = _pysim(config, program, ext, pause=0.5, seed=2)
    assert (paused.ext, paused.sp, paused.error, paused.pc) == (want.ext, want.sp, want.error, want.pc)
    assert paused.counters.cycles > want.counters.cycles


@pytest.mark.parametrize("name", ["inorder", "packed-4"])
def test_pysim_st_costs_one_cycle_more_than_on_the_bare_port(name):
    """The AXI chip registers an ST's words before W (timing.AXI_ST_DATA_DELAY: in the DMA in order, at the
    banks decoupled): measured on the two chips' RTL, not taken from the cycle model, the same program takes exactly one cycle more per ST on the AXI chip,
    and its LDs none."""
    config = AXI[name].replace(ext_words=2048)
    rng = random.Random(6)
    ext = [rng.randrange(1 << 32) for _ in range(2048)]
    program = [ld(0, 3, 13), st(0, 1030, 13), ld(60, 1030, 13), st(60, 2040, 8), st(4, 100, 1), halt()]
    axi = _pysim(config, program, ext)
    bare = get_backend("pysim").run(config.replace(axi=0), program, ext)
    assert (axi.ext, axi.sp) == (bare.ext, bare.sp)
    assert axi.counters.cycles - bare.counters.cycles == 3
    assert axi.counters.dma - bare.counters.dma == 3


@pytest.mark.parametrize("name", ["inorder", "packed-4"])
def test_pysim_debug_reads_come_at_the_chips_latency(name):
    """The host's debug port on the AXI chips, a new address every cycle: the words come back in order, and the
    cycles from an address to its word, measured (the one shift at which every word read is the word the
    scratchpad holds), are timing.debug_read_latency: three on the decoupled chip, whose port A registers the
    banks' data, two in order."""
    from sim.testing import ChipBench
    config = AXI[name]
    rng = random.Random(7)
    words = [rng.randrange(1 << 32) for _ in range(48)]
    bench, seen = ChipBench(config), []

    async def testbench(ctx):
        bench.poke_scratchpad(ctx, words)
        await ctx.tick().repeat(3)                  # the debug port serves an idle chip
        for addr in range(len(words) + 6):
            ctx.set(bench.chip.debug.addr, min(addr, len(words) - 1))
            await ctx.tick()
            seen.append(ctx.get(bench.chip.debug.data))

    bench.simulate(testbench)
    shifts = [k for k in range(1, 6) if seen[k - 1:k - 1 + len(words)] == words]
    assert shifts == [debug_read_latency(config)] == [3 if config.decoupled else 2]


def _random_jobs(config, n, seed, faults=True):
    rng = random.Random(seed)
    jobs = []
    for _ in range(n):
        fault = rng.choice(FAULT_KINDS) if faults and rng.random() < 0.2 else None
        program = random_program(rng.randint, config, fault, cramped=rng.random() < 0.5)
        jobs.append((program, random_words(rng, config.ext_words), random_words(rng, 64)))
    return jobs


def _fence_jobs(config, n, seed):
    """Loads and stores crowded on the first 64 external elements, so that loads meet stores whose answers are
    still on their way, and programs that end (or fault) right after a store."""
    rng = random.Random(seed)
    jobs = []
    for _ in range(n):
        program = []
        for _ in range(rng.randint(2, 8)):
            length = rng.randint(1, 24)
            x, a = rng.randint(0, 64 - length), rng.randint(0, 128)
            program.append(ld(a, x, length) if rng.random() < 0.5 else st(a, x, length))
        program.append(st(0, rng.randint(0, 40), rng.randint(1, 24)))
        program.append(halt() if rng.random() < 0.7 else st(0, config.ext_words, 1))     # HALT or EXT_RANGE
        jobs.append((program, random_words(rng, 64), random_words(rng, 256)))
    return jobs


def _page_jobs(config, n, seed):
    """Loads and stores across 4 KiB pages (1,024 words, or 4,096 packed bytes) and longer than 256 beats."""
    rng = random.Random(seed)
    page = 4096 // (4 if config.bus_bytes == 1 else 1)
    jobs = []
    for _ in range(n):
        program = []
        for _ in range(rng.randint(1, 5)):
            length = rng.randint(1, config.sp_words)
            x = min(max(0, rng.randint(1, config.ext_words // page - 1) * page - rng.randint(0, length)),
                    config.ext_words - length)
            a = rng.randint(0, config.sp_words - length)
            program.append(ld(a, x, length) if rng.random() < 0.5 else st(a, x, length))
        jobs.append((program + [halt()], random_words(rng, config.ext_words), random_words(rng, 64)))
    return jobs


def test_page_jobs_cross_pages():
    for name in ("inorder", "packed-4"):
        config = AXI[name]
        crossing = sum(len(bursts(i.src if i.op.name == "LD" else i.dst, i.len, config)) > 1
                       for p, _, _ in _page_jobs(config, 20, seed=3) for i in p[:-1])
        assert crossing > 20, (name, crossing)


def test_fence_jobs_make_loads_and_halts_wait():
    """The fence programs' strength, on the cycle model: with writes answered five cycles late, most of them
    take longer than with the answer the cycle after (a load or the HALT waited)."""
    for name in ("inorder-slow-b", "packed-4-slow-b"):
        config = AXI[name]
        jobs = _fence_jobs(config, 40, seed=len(name))
        slower = sum(cycle_counts(p, config)[0].cycles > cycle_counts(p, config.replace(ext_write_latency=1))[0].cycles
                     for p, _, _ in jobs)
        assert slower > 30, (name, slower)


@needs_verilator
@pytest.mark.parametrize("name", list(AXI))
def test_verilator_ideal_subordinate_is_the_cycle_model(name):
    """Random programs of every opcode, faults included: memories and the six counters equal to the machine's
    and the cycle model's."""
    config = AXI[name]
    jobs = (_random_jobs(config, 60, seed=sorted(AXI).index(name)) + _fence_jobs(config, 40, seed=len(name))
            + _page_jobs(config, 20, seed=3))
    results = get_backend("verilator").run_many(config, [(p, e, s, cycle_limit_for(p, config)) for p, e, s in jobs])
    for (program, ext, sp), got in zip(jobs, results):
        want = run(program, config, ext, sp)
        diffs = compare_results(want, got)
        assert not diffs, format_program(program) + "\n" + "\n".join(diffs)
        assert cycle_counts(program, config) == (want.counters, want.error, want.pc)


@needs_verilator
@pytest.mark.parametrize("name", list(AXI))
@pytest.mark.parametrize("pause", [0.3, 0.8])
def test_verilator_random_backpressure(name, pause):
    """Every channel held at random (W taken before its AW at times): the same memories, error and pc; the run
    only gets longer."""
    from sim.verilator import VerilatorSim
    config = AXI[name]
    jobs = _random_jobs(config, 40, seed=7) + _fence_jobs(config, 20, seed=8) + _page_jobs(config, 10, seed=9)
    sim = VerilatorSim(config)
    try:
        results = sim.run_many([(p, e, s, 20 * cycle_limit_for(p, config)) for p, e, s in jobs], axi_pause=pause,
                               axi_seed=11)
    finally:
        sim.close()
    slower = 0
    for (program, ext, sp), got in zip(jobs, results):
        want = run(program, config, ext, sp)
        assert (got.ext, got.sp, got.error, got.pc) == (want.ext, want.sp, want.error, want.pc), \
            format_program(program)
        assert got.counters.cycles >= want.counters.cycles and got.counters.instructions == want.counters.instructions
        slower += got.counters.cycles > want.counters.cycles
    assert slower > len(jobs) // 4          # the pauses really bite (programs without LD or ST cannot slow)


def _axiram_check(config, jobs, pause, seed, exact):
    """Run ``jobs`` (program, ext) against AxiRam in one simulation; each job starts from the scratchpad the last
    one left (zero at first), so the reference does too."""
    results = run_axiram(config, [(p, e, 20 * cycle_limit_for(p, config)) for p, e in jobs], pause=pause, seed=seed)
    sp = [0] * config.sp_words
    for (program, ext), got in zip(jobs, results):
        want = run(program, config, ext, sp)
        assert not got.hang, format_program(program)
        assert (got.ext, got.sp, got.error, got.pc) == (want.ext, want.sp, want.error, want.pc), \
            format_program(program)
        if exact:
            assert got.counters == want.counters, format_program(program)
        else:
            assert got.counters.cycles >= want.counters.cycles
        sp = got.sp


def _axiram_jobs(config, n, seed):
    return [(p, e) for p, e, _ in (fuzz_job(config, seed + k) for k in range(n))]


@needs_axiram
@pytest.mark.parametrize("config", [AXIRAM, AXIRAM_WORDS], ids=["packed-4", "words"])
def test_axiram_without_pauses_is_the_cycle_model(config):
    _axiram_check(config, _axiram_jobs(config, 12, seed=300), pause=0.0, seed=0, exact=True)


@needs_axiram
@pytest.mark.parametrize("config", [AXIRAM, AXIRAM_WORDS], ids=["packed-4", "words"])
def test_axiram_under_random_backpressure(config):
    _axiram_check(config, _axiram_jobs(config, 15, seed=500), pause=0.4, seed=9, exact=False)


@needs_axiram
@pytest.mark.axi
@pytest.mark.slow
def test_axiram_1000_random_programs(request):
    """The long run: 1,000 random programs under random backpressure on every channel (4 runs of 250, pauses
    0.2 to 0.8), memories identical. Selected by -m axi (or -m slow)."""
    selected = request.config.getoption("-m") or ""
    if "axi" not in selected and "slow" not in selected and not os.environ.get("GA2_SLOW"):
        pytest.skip("long run: select it with -m axi")
    for n, pause in enumerate((0.2, 0.4, 0.6, 0.8)):
        config = AXIRAM if n % 2 else AXIRAM_WORDS
        _axiram_check(config, _axiram_jobs(config, 250, seed=10_000 + 250 * n), pause=pause, seed=n, exact=False)
