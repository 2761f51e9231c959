"""The decoupled scoreboard and the ranges the checker computes for it, in pysim, against the software
rule (``ga2_sw.cycles.accesses`` / ``conflict``, plain Python on the instruction fields)."""

import random

import pytest
from amaranth.back import verilog
from ga2_hdl.control import checker
from ga2_hdl.control.checker import InstrChecker
from ga2_hdl.control.scoreboard import Scoreboard
from ga2_hdl.top import checker_parameters, scoreboard_parameters
from sim.testing import assert_build_refused, run_bench, unit_verilog, verilog_ports
from ga2_sw.config import Config
from ga2_sw.cycles import accesses, conflict, lane_of
from ga2_sw.isa import LANES, encode, Op
from ga2_sw.timing import CHECK_LATENCY
from sim.random_programs import random_valid_instr

CONFIG = Config(sp_words=256, ext_words=256, mode="decoupled")
CRAMPED = CONFIG.replace(sp_words=64, ext_words=64)


def _instrs(seed, n):
    rng = random.Random(seed)
    return [random_valid_instr(rng.randint, CRAMPED if rng.random() < 0.7 else CONFIG) for _ in range(n)]


def _set_access(ctx, port, instr):
    ranges = accesses(instr) + [(0, 0, False, False)] * 3
    for name, (lo, hi, rd, wr) in zip("abc", ranges):
        r = getattr(port, name)
        ctx.set(r.lo, lo)
        ctx.set(r.hi, hi)
        ctx.set(r.rd, int(rd))
        ctx.set(r.wr, int(wr))


async def _decode(ctx, dut, instr):
    """The sequencer's decode cycle: ``instr`` becomes the candidate."""
    _set_access(ctx, dut.ranges, instr)
    ctx.set(dut.load, 1)
    await ctx.tick()
    ctx.set(dut.load, 0)
    _set_access(ctx, dut.ranges, instr.__class__(Op.HALT))     # the memory's data moves on: must not matter


def _lane_bit(instr):
    return 1 << LANES.index(lane_of(instr.op))


async def _issue(ctx, dut, instr):
    await _decode(ctx, dut, instr)
    ctx.set(dut.issue, _lane_bit(instr))
    await ctx.tick()
    ctx.set(dut.issue, 0)


def _blocked(ctx, dut):
    """The ``blocked`` bits by lane name."""
    bits = ctx.get(dut.blocked)
    return {lane: bits >> n & 1 for n, lane in enumerate(LANES)}


def test_blocked_is_the_software_conflict_rule():
    """Random pairs, mostly crowded into 64 words: the in-flight one goes into its lane's entry, then for the
    candidate decoded next, a lane's ``blocked`` bit must be ``conflict`` exactly while the in-flight lane is
    busy and the candidate's lane is another (or both are the matrix lane, whose entry outlives its busy
    time: ``test_an_mm_is_in_flight_until_its_last_write``), and 0 once it is idle."""
    dut = Scoreboard(**scoreboard_parameters(CONFIG))
    pairs = list(zip(_instrs(1, 300), _instrs(2, 300)))
    seen = {True: 0, False: 0}

    async def bench(ctx):
        for flying, cand in pairs:
            await _issue(ctx, dut, flying)
            await _decode(ctx, dut, cand)
            ctx.set(dut.busy, _lane_bit(flying))
            want = conflict(cand, flying)
            for lane, got in _blocked(ctx, dut).items():
                own = lane == lane_of(flying.op) != "matrix"
                assert got == int(want and not own), f"{cand} on {lane} while {flying} in flight"
            seen[want] += 1
            ctx.set(dut.busy, 0)
            assert ctx.get(dut.blocked) == 0
    run_bench(dut, bench)
    assert seen[True] > 60 and seen[False] > 60, seen


def test_ranges_that_share_one_end_word_conflict():
    """Inclusive ranges: a candidate whose first word is the in-flight range's last, or whose last word is its
    first, conflicts (random pairs rarely land exactly there)."""
    from ga2_sw import isa
    dut = Scoreboard(**scoreboard_parameters(CONFIG))
    load = isa.ld(dst=10, src=0, len=5)                          # writes 10 .. 14
    cases = [isa.rq(dst=100, src=14, len=3, m=1, s=0),           # reads 14 .. 16: its first is the load's last
             isa.rq(dst=100, src=6, len=5, m=1, s=0),            # reads 6 .. 10: its last is the load's first
             isa.mm(dst=200, A=40, B=60, M=1, K=1, N=1, lda=1, ldb=1, ldc=1),   # elsewhere
             isa.rq(dst=100, src=15, len=3, m=1, s=0)]           # reads 15 .. 17: just past it

    async def bench(ctx):
        for cand in cases:
            await _issue(ctx, dut, load)
            await _decode(ctx, dut, cand)
            ctx.set(dut.busy, _lane_bit(load))
            want = conflict(cand, load)
            assert want == (cand.src in (6, 14) and cand.op == Op.RQ), cand    # the software rule agrees
            assert _blocked(ctx, dut)[lane_of(cand.op)] == int(want), cand
            ctx.set(dut.busy, 0)
    run_bench(dut, bench)


def test_every_entry_is_kept():
    """An entry stays while the other lanes issue: a DMA load and an MM in flight each still block after
    the other lanes issued beside them, each only while its own lane is busy."""
    from ga2_sw import isa
    dut = Scoreboard(**scoreboard_parameters(CONFIG))
    load = isa.ld(dst=10, src=0, len=20)
    mm = isa.mm(dst=100, A=40, B=60, M=2, K=4, N=2, lda=4, ldb=2, ldc=2)
    rq = isa.rq(dst=300, src=250, len=4, m=1, s=0)
    dma, matrix, vector = (1 << LANES.index(lane) for lane in ("dma", "matrix", "vector"))

    async def bench(ctx):
        for instr in (load, mm, rq):
            await _issue(ctx, dut, instr)
        for cand, lane in ((isa.rq(dst=200, src=25, len=3, m=1, s=0), dma),     # reads what the load writes
                           (isa.st(src=101, dst=0, len=2), matrix),             # reads what the MM writes
                           (isa.mm(dst=252, A=40, B=60, M=1, K=1, N=1), vector)):  # writes what the RQ reads
            await _decode(ctx, dut, cand)
            ctx.set(dut.busy, dma | matrix | vector)
            blocking = LANES[lane.bit_length() - 1]
            # Blocked on every lane but the one whose entry it meets (the sequencer waits for that lane anyway;
            # the matrix lane's entry counts on every lane, as it stays in flight while the MM drains).
            assert _blocked(ctx, dut) == {name: int(name != blocking or name == "matrix") for name in LANES}, cand
            ctx.set(dut.busy, (dma | matrix | vector) ^ lane)
            assert ctx.get(dut.blocked) == 0, cand    # the other entries' ranges are elsewhere
    run_bench(dut, bench)


def test_an_mm_is_in_flight_until_its_last_write():
    """The matrix lane falls idle after an MM's last read, and the MM stays in flight until its result writer
    stops draining: through the matrix entry, on every lane (the next MM too), while the lane is busy or the unit
    drains; once the next MM has issued, through the second entry, while the lane is busy and the unit drains
    (its reads beside the last MM's writes), and then no more (the next MM does not touch its words)."""
    from ga2_sw import isa
    dut = Scoreboard(**scoreboard_parameters(CONFIG))
    mm = isa.mm(dst=100, A=40, B=60, M=2, K=4, N=2, lda=4, ldb=2, ldc=2)
    next_mm = isa.mm(dst=200, A=0, B=8, M=1, K=2, N=1, lda=2, ldb=1, ldc=1)
    readers = [isa.st(src=101, dst=0, len=2), isa.rq(dst=150, src=102, len=1, m=1, s=0),
               isa.mm(dst=220, A=100, B=8, M=1, K=2, N=1, lda=2, ldb=1, ldc=1)]
    matrix = 1 << LANES.index("matrix")
    everywhere = {name: 1 for name in LANES}

    async def bench(ctx):
        for reader in readers:
            assert conflict(reader, mm) and not conflict(reader, next_mm)
            ctx.set(dut.busy, 0)
            ctx.set(dut.draining, 0)
            await _issue(ctx, dut, mm)
            await _decode(ctx, dut, reader)
            ctx.set(dut.busy, matrix)
            assert _blocked(ctx, dut) == everywhere, reader          # read
            ctx.set(dut.busy, 0)
            ctx.set(dut.draining, 1)
            assert _blocked(ctx, dut) == everywhere, reader          # written
            await _issue(ctx, dut, next_mm)                          # the next MM on the lane
            await _decode(ctx, dut, reader)
            ctx.set(dut.busy, matrix)
            assert _blocked(ctx, dut) == everywhere, reader          # still written, beside the next one's reads
            ctx.set(dut.draining, 0)
            assert ctx.get(dut.blocked) == 0, reader                 # written: only the next MM is in flight
    run_bench(dut, bench)


def test_checker_computes_the_ranges_of_accesses():
    """The ranges the checker writes beside each error code are ``accesses`` of the word, for every
    opcode, strided and transposed MMs included."""
    dut = InstrChecker(**checker_parameters(CONFIG))
    words = _instrs(3, 200)

    async def writer(ctx):
        for n, instr in enumerate(words):
            ctx.set(dut.we, 1)
            ctx.set(dut.addr, n)
            ctx.set(dut.word, encode(instr))
            await ctx.tick()
        ctx.set(dut.we, 0)
        await ctx.tick().repeat(CHECK_LATENCY + 1)

    async def reader(ctx):
        got = 0
        fields = [getattr(getattr(dut.access, r), f) for r in "abc" for f in ("lo", "hi", "rd", "wr")]
        async for _, _, we, addr, *values in ctx.tick().sample(dut.err_we, dut.err_addr, *fields):
            if we:
                instr = words[addr]
                want = accesses(instr) + [(None, None, False, False)] * 3
                for n, (name, (lo, hi, rd, wr)) in enumerate(zip("abc", want)):
                    g_lo, g_hi, g_rd, g_wr = values[4 * n:4 * n + 4]
                    assert (g_rd, g_wr) == (int(rd), int(wr)), (instr, name)
                    if rd or wr:
                        assert (g_lo, g_hi) == (lo, hi), (instr, name)
                got += 1
                if got == len(words):
                    return
    run_bench(dut, writer, reader)


def test_verilog():
    """Module `sb` with the scoreboard's ports, deterministic, lint clean (sim.testing.unit_verilog)."""
    text = unit_verilog(lambda: Scoreboard(**scoreboard_parameters(CONFIG)), "sb")
    ports, _ = verilog_ports(text, "sb")
    assert ports["blocked"] == ("output", len(LANES)) and ports["issue"] == ("input", len(LANES))


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_checker_latency_is_the_cycle_models(monkeypatch):
    """The checker's stages must add up to the cycle model's CHECK_LATENCY."""
    verilog.convert(InstrChecker(**checker_parameters(CONFIG)), name="chk")
    monkeypatch.setattr(checker, "CHECK_LATENCY", CHECK_LATENCY + 1)
    assert_build_refused(lambda: InstrChecker(**checker_parameters(CONFIG)),
                         "The checker's stages add up to 2 + 2 cycles where the cycle model "
                         '(ga2_sw.timing) says CHECK_LATENCY = 5')
