# amaranth: UnusedElaboratable=no
"""The decoupled chip's banked scratchpad (ga2_sw/banking.py, ga2_hdl/memory/banked_scratchpad.py): the RTL's bank map
and requantiser skew equal the model's, the model's costs equal an independent cycle-by-cycle arbitration, the
skew never lets a read and a write meet on a bank, and the scratchpad routes and flags accesses as documented."""

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from ga2_sw import isa
from ga2_sw.banking import (RQ_MAX_SKEW, RQ_READ_TO_WRITE, bank_of, mm_extra_cycles, row_of, rq_write_skew,
                            slice_addresses)
from ga2_sw.config import Config
from ga2_hdl.memory.banked_scratchpad import BankedScratchpad, bank_index
from ga2_hdl.vector.requantiser import write_skew
from ga2_hdl.top import scratchpad_parameters
from sim.testing import arbitrated_rounds

DECOUPLED = Config(mode="decoupled")


def _comb(build, inputs):
    """Evaluate a combinational function of Signals on each input tuple in pysim."""
    m = Module()
    ins = [Signal(16, name=f"in{n}") for n in range(len(inputs[0]))]
    out = Signal(8)
    m.d.comb += out.eq(build(*ins))
    results = []

    async def bench(ctx):
        for values in inputs:
            for sig, v in zip(ins, values):
                ctx.set(sig, v)
            results.append(ctx.get(out))
    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return results


@pytest.mark.parametrize("banks", [4, 16, 64])
def test_rtl_bank_map_is_the_models(banks):
    config = Config(mode="decoupled", sp_banks=banks)
    addrs = list(range(config.sp_words))
    got = _comb(lambda a: bank_index(a[:12], config.sp_banks), [(a,) for a in addrs])
    assert got == [bank_of(a, config) for a in addrs]


def test_bank_map_is_a_bijection_and_bursts_spread():
    """Every (bank, row) holds one word; any run of sp_banks - 1 consecutive words, and any aligned run of
    sp_banks, touches distinct banks (what a DMA that moves several words a beat needs)."""
    c, nb = DECOUPLED, DECOUPLED.sp_banks
    assert len({(bank_of(a, c), row_of(a, c)) for a in range(c.sp_words)}) == c.sp_words
    for a in range(c.sp_words - nb):
        assert len({bank_of(a + t, c) for t in range(nb - 1)}) == nb - 1
        if a % nb == 0:
            assert len({bank_of(a + t, c) for t in range(nb)}) == nb


def test_rtl_rq_skew_is_the_models():
    rng = random.Random(12)
    pairs = [(s, d) for s in range(0, 64) for d in range(0, 64)]
    pairs += [(rng.randrange(4096), rng.randrange(4096)) for _ in range(3000)]
    got = _comb(lambda s, d: write_skew(s[:16], d[:16], banks=DECOUPLED.sp_banks, lanes=DECOUPLED.rq_lanes), pairs)
    want = [rq_write_skew(isa.rq(d, s, 1, 1, 0), DECOUPLED) for s, d in pairs]
    assert got == want
    assert max(want) == RQ_MAX_SKEW     # the largest skew is reached, and never exceeded


@pytest.mark.parametrize("banks", [4, 8, 16])
def test_rq_skew_keeps_reads_and_writes_off_each_others_banks(banks):
    """Independent of the skew's formula: list every cycle's read and write address and look for a bank met
    twice."""
    config = Config(mode="decoupled", sp_banks=banks)
    for src in range(0, 160, 3):
        for dst in range(0, 160, 5):
            instr = isa.rq(dst, src, 40, 1, 0)
            skew = rq_write_skew(instr, config)
            lag = RQ_READ_TO_WRITE + skew
            for t in range(lag, 40):        # cycle of element t's read = cycle element t - lag reaches memory
                assert bank_of(src + t, config) != bank_of(dst + t - lag, config), (src, dst, t, skew)


def test_mm_extra_cycles_equal_a_cycle_by_cycle_arbitration():
    rng = random.Random(5)
    config = Config(mode="decoupled", rows=4, cols=4)
    for _ in range(400):
        M, N, K = rng.randint(1, 4), rng.randint(1, 4), rng.randint(1, 20)
        instr = isa.mm(rng.randrange(2048), rng.randrange(1024), rng.randrange(1024), M, K, N,
                       rng.randint(0, 1), rng.choice([1, 16, 17, 32, rng.randrange(64)]),
                       rng.choice([1, 16, 17, 32, rng.randrange(64)]), 16)
        want = sum(max(arbitrated_rounds(slice_addresses(instr, k), lambda a: bank_of(a, config)))
                   for k in range(K))
        assert mm_extra_cycles(instr, config) == want, instr


def test_decoupled_busy_times_count_the_conflicts():
    c = DECOUPLED
    # A's one row steps a bank a word; B's columns (tb, 16 apart: banks 1, 3, 5, 7 past A's) step with it
    clean = isa.mm(2000, 0, 8, 1, 16, 4, 1, 16, 16, 4)
    rows_on_one_bank = isa.mm(2000, 0, 1, 2, 8, 1, 0, 16 * 17, 0, 4)
    assert mm_extra_cycles(clean, c) == 0
    # K slices; addresses, plan, request register, read, data register, select register, hold register, step,
    # last accumulate; M*N writes
    assert isa.OPS[isa.Op.MM].busy(clean, c) == 16 + 8 + 4
    assert mm_extra_cycles(rows_on_one_bank, c) > 0


def _scratchpad_bench(config, accesses):
    """Drive a BankedScratchpad with per-cycle requests {group: (en, addr[, data])}; return the data each read
    group saw in each cycle after the first (seen[t]: the cycle after request cycle t) and, last, the
    collided flag and the words. Port A's reads (dma) are registered once, their data in seen[t+1]; port B's (mm0,
    mm1) three times, their data in seen[t+3]."""
    sp = BankedScratchpad(**scratchpad_parameters(config), reads={"dma": 1, "mm0": 1, "mm1": 1},
                          writes={"dma": 1, "compute": 1}, port_a=("dma",), init=list(range(config.sp_words)))
    assert [sp.read_latency(g) for g in ("dma", "mm0", "mm1")] == [2, 4, 4]
    seen = []

    async def bench(ctx):
        for cycle in accesses + [{}] * 3:
            for g in ("dma", "mm0", "mm1"):
                en, addr = cycle.get(("r", g), (0, 0))
                port = sp.read_group(g)[0]
                # A port without a request parks its address elsewhere: data must follow the requests only.
                ctx.set(port.en, en)
                ctx.set(port.addr, addr if en else (ctx.get(port.addr) + 1) % config.sp_words)
            for g in ("dma", "compute"):
                en, addr, data = cycle.get(("w", g), (0, 0, 0))
                ctx.set(sp.write_group(g)[0].en, en)
                ctx.set(sp.write_group(g)[0].addr, addr)
                ctx.set(sp.write_group(g)[0].data, data)
            await ctx.tick()
            seen.append({g: ctx.get(sp.read_group(g)[0].data) for g in ("dma", "mm0", "mm1")})
        await ctx.tick().repeat(2)
        seen.append({"collided": ctx.get(sp.collided), "words": [ctx.get(sp.cell(a)) for a in range(config.sp_words)]})
    sim = Simulator(sp)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_banked_scratchpad_routes_reads_and_writes():
    config = Config(mode="decoupled", sp_words=256)
    a, b = 5, 6                                   # consecutive: different banks
    assert bank_of(a, config) != bank_of(b, config)
    seen = _scratchpad_bench(config, [
        {("r", "mm0"): (1, a), ("r", "mm1"): (1, b), ("r", "dma"): (1, 200)},
        {("w", "dma"): (1, 7, 0xABCD), ("w", "compute"): (1, 8, 0x1234)},
        {}, {("r", "mm0"): (1, 7), ("r", "mm1"): (1, 8)},
    ])
    assert seen[1]["dma"] == 200 and (seen[3]["mm0"], seen[3]["mm1"]) == (a, b)
    assert (seen[6]["mm0"], seen[6]["mm1"]) == (0xABCD, 0x1234)
    assert not seen[-1]["collided"]
    assert seen[-1]["words"][7:9] == [0xABCD, 0x1234]


def test_banked_scratchpad_flags_a_collision():
    config = Config(mode="decoupled", sp_words=256)
    same_bank = next(x for x in range(1, 256) if bank_of(x, config) == bank_of(0, config))
    assert _scratchpad_bench(config, [{("r", "mm0"): (1, 0), ("r", "mm1"): (1, same_bank)}])[-1]["collided"]
    # A write on port A to the word port B reads in the same cycle: both requests reach the bank a cycle later.
    assert _scratchpad_bench(config, [{("w", "dma"): (1, 9, 1), ("r", "mm0"): (1, 9)}])[-1]["collided"]
    assert not _scratchpad_bench(config, [{("w", "dma"): (1, 9, 1)}, {("r", "mm0"): (1, 9)}])[-1]["collided"]


def _lane_set_bench(banks, lanes, cycles):
    """A BankedScratchpad whose port A has one lane set of ``lanes`` read and write groups (``dma``, ``dma1``,
    ...), driven with ``cycles``: each ``(kind, addresses, data)``, kind "r" or "w", ``addresses`` one per lane
    (None: the lane is off). An off lane's address is parked anywhere in a read and, as the units drive it, at
    its word of the run in a write (``base``, lane 0's word, is the run's first word less the lanes before it).
    Returns what each read cycle's lanes saw (None where off), the words, and the collided flag."""
    config = Config(mode="decoupled", sp_words=512, sp_banks=banks)
    names = tuple(f"dma{j or ''}" for j in range(lanes))
    sp = BankedScratchpad(**scratchpad_parameters(config), reads=dict.fromkeys(names, 1),
                          writes=dict.fromkeys(names, 1), port_a=names, lane_reads=[names], lane_writes=[names])
    assert sp.read_latency("dma") == 2
    rng, seen = random.Random(1), []

    async def bench(ctx):
        driven = cycles + [("r", [None] * lanes, None)]
        for t, (kind, addresses, data) in enumerate(driven):
            for j, name in enumerate(names):
                run = next(((a - i) % config.sp_words for i, a in enumerate(addresses) if a is not None), 0)
                for group, on in ((sp.read_group(name)[0], kind == "r"), (sp.write_group(name)[0], kind == "w")):
                    live = on and addresses[j] is not None
                    ctx.set(group.en, live)
                    parked = (run + j) % config.sp_words if kind == "w" else rng.randrange(config.sp_words)
                    ctx.set(group.addr, addresses[j] if live else parked)
                if kind == "w":
                    ctx.set(sp.write_group(name)[0].data, data[j] if addresses[j] is not None else 0)
            await ctx.tick()
            if t and driven[t - 1][0] == "r":      # a read's data: the cycle after its request's
                seen.append([ctx.get(sp.read_group(n)[0].data) if a is not None else None
                             for n, a in zip(names, driven[t - 1][1])])
        await ctx.tick().repeat(2)
        seen.append({"words": [ctx.get(sp.cell(a)) for a in range(config.sp_words)],
                     "collided": ctx.get(sp.collided)})
    sim = Simulator(sp)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize("banks, lanes", [(16, 8), (32, 16)])
def test_a_lane_set_moves_runs_of_consecutive_words(banks, lanes):
    """A lane set's banks take their rows from the set's even and odd rows: random runs of consecutive words
    (across multiples of the bank count, the first and last lanes off as an unaligned LD's or ST's are) written
    and read back through the lanes equal a plain list's words, and nothing is flagged."""
    rng = random.Random(banks)
    words, cycles, expected = [0] * 512, [], []
    for n in range(120):
        # lane 0's word below 0 (a run from word 0 on, its lanes' words wrapping past the top) now and then
        base = rng.randrange(-lanes + 2, 0) if rng.random() < 0.15 else rng.randrange(512 - lanes)
        first, last = sorted(rng.sample(range(max(0, -base), lanes + 1), 2))
        addresses = [base + j if first <= j < last else None for j in range(lanes)]
        if n < 40 or rng.random() < 0.5:
            data = [rng.getrandbits(32) for _ in range(lanes)]
            for a, d in zip(addresses, data):
                if a is not None:
                    words[a] = d
            cycles.append(("w", addresses, data))
        else:
            expected.append([words[a] if a is not None else None for a in addresses])
            cycles.append(("r", addresses, None))
    crossing = sum(1 for _, addresses, _ in cycles
                   if len({a // banks for a in addresses if a is not None}) == 2)
    assert crossing > 10, "too few runs cross a multiple of the banks: the test is too weak"
    assert sum(1 for _, addresses, _ in cycles if addresses[0] is None and 0 in addresses) > 1, "no run from word 0"
    *reads, final = _lane_set_bench(banks, lanes, cycles)
    assert reads == expected
    assert final["words"] == words and not final["collided"]


def test_a_lane_set_flags_lanes_that_are_not_consecutive():
    """Two lanes of a set on rows two apart, or on one row but not consecutive (distinct banks either way, so
    only the lane set's own watches can tell)."""
    banks = 16
    far = 2 * banks + 1
    assert bank_of(far, Config(mode="decoupled", sp_banks=banks)) != bank_of(0, Config(mode="decoupled", sp_banks=banks))
    lanes = [0, far] + [None] * 6
    assert _lane_set_bench(banks, 8, [("w", lanes, [1] * 8)])[-1]["collided"]
    # ... and a lane on its run's row but not at its word (a write set's data is rotated from lane 0's word)
    assert _lane_set_bench(banks, 8, [("w", [0, 3] + [None] * 6, [1] * 8)])[-1]["collided"]
    assert not _lane_set_bench(banks, 8, [("w", [0, 1] + [None] * 6, [1] * 8)])[-1]["collided"]


def test_debug_reads_wait_for_the_last_write():
    """The host's debug reads share the compute lane's bank port: with the debug address parked on the bank of
    an RQ's last write, that write (a cycle after the unit's last busy one) must not meet a debug read."""
    from ga2_sw.machine import Machine
    from sim.testing import ChipBench
    config = Config(mode="decoupled", sp_words=256, ext_words=256, imem_words=8)
    program = [isa.rq(dst=100, src=0, len=6, m=3, s=1), isa.halt()]
    last = 105
    parked = next(a for a in range(256) if a != last and bank_of(a, config) == bank_of(last, config))
    sp = [(7 * a + 1) & 0xFF for a in range(256)]
    bench, out = ChipBench(config), {}

    async def testbench(ctx):
        bench.poke_scratchpad(ctx, sp)
        ctx.set(bench.chip.debug.addr, parked)
        await bench.load_program(ctx, program)
        await bench.run_to_done(ctx)
        await ctx.tick().repeat(3)
        out["result"] = bench.result(ctx)      # raises if the scratchpad saw a collision
    bench.simulate(testbench)
    assert out["result"].sp == Machine(config).run(program, sp=sp).sp


@pytest.mark.parametrize("reads, writes, message", [
    ([("dma",)], [], "two or more distinct read groups"),
    ([("dma", "dma")], [], "two or more distinct read groups"),
    ([], [("dma", "nowhere")], "two or more distinct write groups"),
    ([("dma", "mm0")], [], "must be on one port"),
])
def test_a_lane_set_names_groups_of_one_port(reads, writes, message):
    config = Config(mode="decoupled", sp_words=256)
    with pytest.raises(ValueError, match=message):
        BankedScratchpad(**scratchpad_parameters(config), reads={"dma": 1, "dma1": 1, "mm0": 1},
                         writes={"dma": 1, "dma1": 1}, port_a=("dma", "dma1"), lane_reads=reads, lane_writes=writes)
