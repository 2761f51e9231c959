"""The softmax RTL against ga2_sw.numerics.softmax_q16: values, timing (X = 3*len + 21; with two lanes, decoupled,
X = 2*ceil(len/2) + len + 25) and overlap."""

import random

import pytest
from ga2_hdl.vector.softmax import Softmax
from ga2_hdl.vector import softmax_back
from ga2_hdl.top import build_unit, unit_parameters
from sim.testing import assert_build_refused, UnitBench, run_bench, start_and_wait, unit_verilog, verilog_ports
from ga2_sw.config import Config
from ga2_sw.isa import encode, sm
from ga2_sw.numerics import softmax_q16

CONFIG = Config(sp_words=256)          # sm_max_len keeps its default, 64
# Two lanes (Config.sm_lanes): decoupled, on the banked scratchpad, whose registers add 4 to the overhead.
TWO_LANES = Config(mode="decoupled", sp_words=256, sm_lanes=2)


def two_lane_busy(n):
    """The max and exp passes a pair a cycle, the divide pass an element a cycle, the decoupled overhead 25."""
    return 2 * ((n + 1) // 2) + n + 25


def garbage_word(rng, score):
    """A source word whose low 8 bits hold the int8 score and whose upper 24 bits are noise."""
    return (rng.randrange(1 << 24) << 8) | (score & 0xFF)


def run_sm_program(words, instrs, config=CONFIG):
    """Run SM instructions (dst, src, len) one after another; return the scratchpad and the busy times."""
    dut = build_unit("sm", config)
    bench = UnitBench(dut, config, sp_init=words)
    busy = []
    contents = []

    async def testbench(ctx):
        for dst, src, length in instrs:
            busy.append(await start_and_wait(ctx, dut, encode(sm(dst, src, length))))
            await ctx.tick()
        contents.extend(ctx.get(bench.sp.cell(i)) for i in range(config.sp_words))

    run_bench(bench, testbench, vcd_name="softmax")
    return contents, busy


def check_vectors(vectors, seed, overlap=False, config=CONFIG, busy_of=lambda n: 3 * n + 21):
    """Softmax of each score vector, placed with garbage upper bits at consecutive source addresses; the
    results go to a separate region (or over the source itself when ``overlap``); each busy time is
    ``busy_of(len)``."""
    rng = random.Random(seed)
    words, instrs, expected = [], [], {}
    dst = 128
    for scores in vectors:
        src = len(words)
        words += [garbage_word(rng, x) for x in scores]
        out = src if overlap else dst
        instrs.append((out, src, len(scores)))
        for i, p in enumerate(softmax_q16(list(scores))):
            expected[out + i] = p
        dst += len(scores)
    assert len(words) <= 128 and dst <= config.sp_words
    contents, busy = run_sm_program(words, instrs, config)
    assert busy == [busy_of(len(scores)) for scores in vectors]
    for addr in range(config.sp_words):
        want = expected.get(addr, words[addr] if addr < len(words) else 0)
        assert contents[addr] == want, f"sp[{addr}] = {contents[addr]}, expected {want}"


def test_random_lengths():
    rng = random.Random(20)
    vectors = [[rng.randrange(-128, 128) for _ in range(n)] for n in (1, 2, 5, 16)]
    check_vectors(vectors, seed=21)


def test_random_full_length():
    rng = random.Random(22)
    # A narrow spread of scores, so that many probabilities are neither ~0 nor ~1.
    check_vectors([[rng.randrange(-40, 40) for _ in range(64)]], seed=23)


def test_edge_vectors():
    vectors = [
        [7] * 5,                        # all equal: 13107 each (65536/5 rounded)
        [127] + [-128] * 6,             # d = 255: EXP[255]
        [-128] * 3 + [127],             # the maximum last
        [3, 50, -20, 50, 0],            # two maxima
        [-128],                         # one score: 65536
        [127, 127],                     # 32768 each
        [0, -16, -32, -48, -64, -80, -96, -112],
    ]
    check_vectors(vectors, seed=24)


def test_destination_equals_source():
    rng = random.Random(25)
    vectors = [[rng.randrange(-128, 128) for _ in range(n)] for n in (3, 16)]
    check_vectors(vectors, seed=26, overlap=True)


def test_destination_overlaps_source_partly():
    # dst = src + 2 within one vector: the source is never read again once writing starts.
    rng = random.Random(27)
    scores = [rng.randrange(-60, 60) for _ in range(10)]
    words = [garbage_word(rng, x) for x in scores]
    contents, busy = run_sm_program(words, [(2, 0, 10)])
    assert busy == [51]
    assert contents[2:12] == softmax_q16(scores)
    assert contents[0:2] == words[0:2]


def test_largest_sm_max_len():
    # sm_max_len = 1024 gives the widest sum: 1024 equal scores make S = 2**26 exactly.
    config = Config(sp_words=2048, sm_max_len=1024)
    rng = random.Random(28)
    scores = [rng.randrange(-128, 128) for _ in range(300)]
    ties = [-5] * 1024
    words = [garbage_word(rng, x) for x in scores + ties]
    contents, busy = run_sm_program(words, [(1400, 0, 300), (300, 300, 1024)], config)
    assert busy == [3 * 300 + 21, 3 * 1024 + 21]
    assert contents[1400:1700] == softmax_q16(scores)
    assert contents[300:1324] == [64] * 1024                 # 65536 / 1024, written over its source


def port_trace(config, dst, src, n, cycles):
    """Start ``SM dst src n`` on the unit alone and record, for each cycle 1 .. ``cycles``: busy, done, each
    read port's address where it reads (else 0) and the write port's address where it writes (else 0)."""
    dut = build_unit("sm", config)
    bench = UnitBench(dut, config, sp_init=range(64))
    trace = []

    async def testbench(ctx):
        ctx.set(dut.ctl.instr.as_value(), encode(sm(dst, src, n)))
        ctx.set(dut.ctl.start, 1)
        await ctx.tick()
        ctx.set(dut.ctl.start, 0)
        for cycle in range(1, cycles + 1):
            trace.append((cycle, ctx.get(dut.ctl.busy), ctx.get(dut.ctl.done),
                          [ctx.get(p.en) and ctx.get(p.addr) for p in dut.read_ports],
                          ctx.get(dut.sp_wr.en) and ctx.get(dut.sp_wr.addr)))
            await ctx.tick()

    run_bench(bench, testbench)
    return trace


def test_port_schedule():
    # Source reads in cycles 1 .. 2n (twice over src .. src+n), writes in 2n+22 .. 3n+21, done in 3n+21.
    dst, src, n = 40, 7, 5
    for cycle, busy, done, rd, wr in port_trace(CONFIG, dst, src, n, 3 * n + 22):
        assert busy == (cycle <= 3 * n + 21), cycle
        assert done == (cycle == 3 * n + 21), cycle
        assert rd == [src + (cycle - 1) % n if cycle <= 2 * n else 0], cycle
        assert wr == (dst + cycle - (2 * n + 22) if 2 * n + 22 <= cycle <= 3 * n + 21 else 0), cycle


def test_two_lanes_random_and_edge_vectors():
    """Two scores a cycle: odd lengths (the second lane idle in the last pair), the maximum in either lane of a
    pair, in the last pair of an odd vector, a single score."""
    rng = random.Random(30)
    vectors = [[rng.randrange(-128, 128) for _ in range(n)] for n in (1, 2, 3, 5, 16)]
    vectors += [[-128] * 6 + [127], [-128, 127, -128], [3, 50, -20, 50, 0], [127, 127], [7] * 5]
    check_vectors(vectors, seed=31, config=TWO_LANES, busy_of=two_lane_busy)


def test_two_lanes_full_length_over_the_source():
    rng = random.Random(32)
    check_vectors([[rng.randrange(-40, 40) for _ in range(63)], [rng.randrange(-40, 40) for _ in range(64)]],
                  seed=33, config=TWO_LANES, busy_of=two_lane_busy, overlap=True)


def test_two_lanes_port_schedule():
    """n = 5, P = 3 pairs: lane 0 reads src+2p and lane 1 src+2p+1 in cycles 1 .. 3 and again in 4 .. 6, lane 1
    idle in each pass's last pair; the quotients are written in 2P + 26 .. 2P + n + 25 = 36, done in 36."""
    dst, src, n, pairs = 40, 7, 5, 3
    last = two_lane_busy(n)
    assert last == 36
    for cycle, busy, done, rd, wr in port_trace(TWO_LANES, dst, src, n, last + 2):
        assert busy == (cycle <= last) and done == (cycle == last), cycle
        pair = (cycle - 1) % pairs
        if cycle <= 2 * pairs:
            assert rd == [src + 2 * pair, src + 2 * pair + 1 if 2 * pair + 1 < n else 0], cycle
        else:
            assert rd == [0, 0], cycle
        assert wr == (dst + cycle - (2 * pairs + 26) if 2 * pairs + 26 <= cycle <= last else 0), cycle


def test_verilog():
    """Module `sm` with the unit ports (128-bit instruction, scratchpad ports), deterministic, lint clean."""
    text = unit_verilog(lambda: build_unit("sm", Config()), "sm")
    ports, _ = verilog_ports(text, "sm")
    assert ports["ctl__instr"] == ("input", 128) and ports["sp_rd__data"] == ("input", 32)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_overhead_is_the_cycle_models():
    """The front end's and the back end's stages must add up to the cycle model's SM_OVERHEAD."""
    wrong = {**unit_parameters("sm", Config()), "overhead": 22}
    assert_build_refused(lambda: Softmax(**wrong),
                         "The softmax's stages add up to 3 + 18 cycles where the cycle model "
                         '(ga2_sw.timing.sm_overhead) says 22')


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_divider_latency_holds_a_probability(monkeypatch):
    """The divider makes one quotient bit per stage: DIVIDER_LATENCY bits must hold 65536."""
    monkeypatch.setattr(softmax_back, "DIVIDER_LATENCY", 16)
    consistent = {**unit_parameters("sm", Config()), "overhead": 20}    # a cycle model consistent with it
    assert_build_refused(lambda: Softmax(**consistent),
                         'A Q16 probability needs 17 quotient bits, but the divider of the cycle '
                         'model (ga2_sw.timing) has 16 stages')
