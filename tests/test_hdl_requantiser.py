"""The requantiser RTL against ga2_sw.numerics.requant: values, timing (X = len + 5), and a destination on or next
to its source."""

import random

import pytest
from ga2_hdl.vector import requant_pipeline
from ga2_hdl.top import build_unit
from sim.testing import assert_build_refused, UnitBench, run_bench, start_and_wait, unit_verilog, verilog_ports
from ga2_sw.config import Config
from ga2_sw.isa import encode, halt, rq
from ga2_sw.numerics import requant, s32, u32
from ga2_sw.timing import RQ_DEPTH      # an element is written RQ_DEPTH steps after its read

CONFIG = Config(sp_words=256)
IN_MEMORY = RQ_DEPTH + 1   # the scratchpad registers each write request: the word lands one step later

# (a, m, s) edge cases: ties at .5 of both signs, saturation both ways, the extreme m, a and s.
EDGES = [
    (1, 1, 1), (-1, 1, 1), (3, 1, 1), (-3, 1, 1),              # +0.5, -0.5, +1.5, -1.5
    (5, 3, 4), (-5, 3, 4), (-8, 1, 4), (8, 1, 4),              # +-15/16, +-0.5
    (1000, 1, 0), (-1000, 1, 0), (127, 1, 0), (-128, 1, 0),    # saturation, s = 0 (no rounding term)
    (128, 1, 0), (-129, 1, 0), (255, 1, 1), (-257, 1, 1),
    (-2**31, -32768, 47), (-2**31, 32767, 47), (2**31 - 1, 32767, 47), (2**31 - 1, -32768, 47),
    (-2**31, -32768, 0), (2**31 - 1, 32767, 0), (-2**31, 1, 24), (2**31 - 1, 1, 24),
    (2**31 - 1, -32768, 38), (-2**31, -32768, 40), (-2**31, -32768, 39), (-2**31, 32767, 39),
    (0, -32768, 47), (-1, -32768, 47), (1, 32767, 47), (12345, -32768, 20),
]


def run_rq_program(words, instrs, config=CONFIG):
    """Run RQ instructions (dst, src, len, m, s) one after another on a scratchpad holding ``words``;
    return the final contents and the busy time of each instruction."""
    dut = build_unit("rq", config)
    bench = UnitBench(dut, config, sp_init=[u32(w) for w in words])
    busy = []
    contents = []

    async def testbench(ctx):
        for dst, src, length, m, s in instrs:
            busy.append(await start_and_wait(ctx, dut, encode(rq(dst, src, length, m, s))))
            await ctx.tick()        # the sequencer's issue cycles: the unit is idle in between
        contents.extend(ctx.get(bench.sp.cell(i)) for i in range(config.sp_words))

    run_bench(bench, testbench, vcd_name="requantiser")
    return contents, busy


def pipeline_model(sp, dst, src, length, m, s):
    """Element i is read at step i and lands in memory at step i + 6; a read sees only earlier landings."""
    read = []
    for step in range(length + IN_MEMORY):
        if step < length:
            read.append(sp[src + step])
        w = step - IN_MEMORY
        if w >= 0:
            sp[dst + w] = u32(requant(s32(read[w]), m, s))


def check_program(words, instrs):
    contents, busy = run_rq_program(words, instrs)
    expected = [u32(w) for w in words] + [0] * (CONFIG.sp_words - len(words))
    for instr in instrs:
        pipeline_model(expected, *instr)
    assert busy == [length + 5 for _, _, length, _, _ in instrs]
    for i, (got, want) in enumerate(zip(contents, expected)):
        assert got == want, f"sp[{i}] = {got:#x}, expected {want:#x}"


def test_edges():
    # Each edge case is an RQ of length 1 on its own word, so every (m, s) pair is exercised.
    words = [a for a, _, _ in EDGES]
    dst0 = 128
    instrs = [(dst0 + i, i, 1, m, s) for i, (_, m, s) in enumerate(EDGES)]
    contents, busy = run_rq_program(words, instrs)
    assert busy == [6] * len(EDGES)
    for i, (a, m, s) in enumerate(EDGES):
        assert contents[dst0 + i] == u32(requant(a, m, s)), (a, m, s)
    # Words that no instruction writes keep their (zero) contents.
    assert all(contents[i] == 0 for i in range(len(EDGES), dst0))
    assert all(contents[i] == 0 for i in range(dst0 + len(EDGES), CONFIG.sp_words))


def test_edges_as_one_vector():
    # The same edge inputs streamed through the pipeline back to back, at a few shifts.
    words = [a for a, _, _ in EDGES]
    n = len(EDGES)
    check_program(words, [(100, 0, n, -32768, 47), (140, 0, n, 32767, 0), (180, 0, n, 77, 9)])


def test_random_lengths():
    rng = random.Random(1)
    words = [rng.randrange(-2**31, 2**31) if rng.random() < 0.5 else rng.randrange(-3000, 3000)
             for _ in range(100)]
    instrs = []
    for length, dst in ((1, 120), (2, 130), (7, 140), (40, 160), (100, 0)):
        s = rng.randrange(48)
        m = rng.randrange(-32768, 32768)
        src = rng.randrange(0, 100 - length + 1)
        instrs.append((dst, src, length, m, s))
    # The last instruction overwrites its own source (dst == src), which the pipeline allows.
    check_program(words, instrs)


def test_values_against_requant():
    # Sizes chosen so a noticeable share of the results is neither 0 nor saturated.
    rng = random.Random(2)
    words = [rng.randrange(-2**31, 2**31) >> rng.randrange(32) for _ in range(60)]
    instrs = [(64 + 64 * j, 0, 60, rng.randrange(-32768, 32768), rng.randrange(10, 48)) for j in range(3)]
    check_program(words, instrs)


def test_untouched_outside_destination():
    words = [0x1234_5678 + i for i in range(256)]
    contents, busy = run_rq_program(words, [(50, 10, 9, 1234, 20)])
    assert busy == [14]
    for i in range(256):
        if not 50 <= i < 59:
            assert contents[i] == words[i], i
    assert contents[50:59] == [u32(requant(w, 1234, 20)) for w in words[10:19]]


def test_destination_next_to_or_on_its_source():
    # The legal RQs closest to their sources (docs/ISA.md: dst == src, or |dst - src| >= len): every element is
    # read before anything lands on its word, whatever the pipeline's depth.
    rng = random.Random(3)
    words = [rng.randrange(-2**31, 2**31) for _ in range(120)]
    instrs = [(30, 10, 20, 3, 1), (0, 20, 20, 3, 1), (60, 60, 20, -5, 2), (100, 99, 1, 7, 0)]
    check_program(words, instrs)
    sp = [u32(w) for w in words] + [0] * (CONFIG.sp_words - len(words))
    for dst, src, length, m, s in instrs:          # check_program's model is "read everything, then write" here
        sp[dst:dst + length] = [u32(requant(s32(w), m, s)) for w in sp[src:src + length]]
    assert sp == run_rq_program(words, instrs)[0]


def test_port_schedule():
    # Element i is read in cycle 1+i and written in cycle 6+i (start pulse in cycle 0); done in cycle len+5.
    dut = build_unit("rq", CONFIG)
    bench = UnitBench(dut, CONFIG, sp_init=range(64))
    dst, src, length = 40, 7, 6
    trace = []

    async def testbench(ctx):
        ctx.set(dut.ctl.instr.as_value(), encode(rq(dst, src, length, 1, 0)))
        ctx.set(dut.ctl.start, 1)
        await ctx.tick()
        ctx.set(dut.ctl.start, 0)
        for cycle in range(1, length + 8):
            trace.append((cycle, ctx.get(dut.ctl.busy), ctx.get(dut.ctl.done),
                          ctx.get(dut.sp_rd.en) and ctx.get(dut.sp_rd.addr),
                          ctx.get(dut.sp_wr.en) and ctx.get(dut.sp_wr.addr)))
            await ctx.tick()

    run_bench(bench, testbench)
    for cycle, busy, done, rd, wr in trace:
        assert busy == (cycle <= length + 5), cycle
        assert done == (cycle == length + 5), cycle
        assert rd == (src + cycle - 1 if cycle <= length else 0), cycle
        assert wr == (dst + cycle - 6 if 6 <= cycle <= length + 5 else 0), cycle


def test_verilog():
    """Module `rq` with the unit ports (128-bit instruction, scratchpad ports), deterministic, lint clean."""
    text = unit_verilog(lambda: build_unit("rq", Config()), "rq")
    ports, _ = verilog_ports(text, "rq")
    assert ports["ctl__instr"] == ("input", 128) and ports["sp_wr__data"] == ("output", 32)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_pipeline_depth_is_the_cycle_models(monkeypatch):
    """A cycle model that disagrees with the pipeline the RTL builds stops the build."""
    monkeypatch.setattr(requant_pipeline, "RQ_DEPTH", RQ_DEPTH + 1)
    assert_build_refused(lambda: build_unit("rq", Config()),
                         'The requantiser pipeline builds 5 registered stages where the cycle model '
                         '(ga2_sw.timing) needs 6')


def test_decoupled_skews_its_writes_off_the_read_bank():
    """Decoupled, an RQ whose read and write could meet on a bank delays its writes by the skew of
    ga2_sw.banking (0, 1 or 2 cycles, each reached here): busy len + 5 + 4 (the announce register, the banked scratchpad's read request,
    data and select registers) + skew, and the same memory as the reference machine's RQ, in place and disjoint (the
    skew never changes what an RQ computes)."""
    from ga2_sw.banking import rq_write_skew
    from ga2_sw.machine import Machine
    config = CONFIG.replace(mode="decoupled")
    rng = random.Random(21)
    words = [rng.randrange(-2**31, 2**31) for _ in range(config.sp_words)]
    instrs, skews = [], set()
    pairs = [(100, 0), (50, 50), (0, 24), (136, 100), (200, 160)]
    for skew in range(3):                   # the first destination after a source at 15 that needs each skew
        pairs.append(next((d, 15) for d in range(27, 200) if rq_write_skew(rq(d, 15, 12, 1, 0), config) == skew))
    for dst, src in pairs:
        instr = rq(dst, src, 12, rng.randrange(-300, 300), rng.randrange(0, 12))
        instrs.append((instr.dst, instr.src, instr.len, instr.m, instr.s))
        skews.add(rq_write_skew(instr, config))
    assert skews == {0, 1, 2}, skews
    contents, busy = run_rq_program(words, instrs, config)
    program = [rq(*i) for i in instrs]
    # the vector lane's announce register and the banked scratchpad's read request, data and select registers
    # add four cycles, the skew its own
    assert busy == [12 + RQ_DEPTH + 4 + rq_write_skew(i, config) for i in program]
    expected = Machine(config).run(program + [halt()], sp=[u32(w) for w in words]).sp
    assert contents == expected
