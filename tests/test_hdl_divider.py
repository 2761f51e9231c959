# amaranth: UnusedElaboratable=no
"""The pipelined divider against Python's //: latency exactly 17 and one division per cycle."""

import random

import pytest

from ga2_hdl.vector.divider import Divider
from ga2_sw.timing import DIVIDER_LATENCY
from sim.testing import assert_build_refused, run_bench, unit_verilog, verilog_ports

NUM_W, DEN_W, QUOT_W = 33, 27, 17
LATENCY = 17


def run_divisions(pairs, gaps=None):
    """Present (num, den) pairs, pair j after ``gaps[j]`` idle cycles (default 0: back to back), and
    return [(cycle the pair was presented, cycle valid_o showed it, quot)]."""
    dut = Divider(num_width=NUM_W, den_width=DEN_W, quot_width=QUOT_W)
    gaps = gaps or [0] * len(pairs)
    schedule = []
    cycle = 0
    for gap in gaps:
        cycle += gap
        schedule.append(cycle)
        cycle += 1
    end = cycle + LATENCY + 2
    inputs = dict(zip(schedule, pairs))
    outputs = []

    async def testbench(ctx):
        for t in range(end):
            if t in inputs:
                num, den = inputs[t]
                ctx.set(dut.num, num)
                ctx.set(dut.den, den)
                ctx.set(dut.valid_i, 1)
            else:
                # Garbage on the data inputs while not valid must not disturb the divisions in flight.
                ctx.set(dut.num, (t * 0x9E3779B1) & ((1 << NUM_W) - 1))
                ctx.set(dut.den, (t * 0x85EBCA6B) & ((1 << DEN_W) - 1))
                ctx.set(dut.valid_i, 0)
            if ctx.get(dut.valid_o):
                outputs.append((t, ctx.get(dut.quot)))
            await ctx.tick()

    run_bench(dut, testbench, vcd_name="divider")
    return [(s, t, q) for s, (t, q) in zip(schedule, outputs)], len(outputs)


def check(pairs, gaps=None):
    results, count = run_divisions(pairs, gaps)
    assert count == len(pairs)
    for (num, den), (presented, seen, quot) in zip(pairs, results):
        assert seen - presented == LATENCY
        assert quot == num // den, (num, den, quot)


def random_pair(rng):
    den = rng.randrange(1, 1 << rng.randrange(1, DEN_W + 1))
    den = min(den, (1 << DEN_W) - 1)
    num = rng.randrange(0, min(den << QUOT_W, 1 << NUM_W))
    return num, den


def test_edges():
    den_max = (1 << DEN_W) - 1
    pairs = [
        (0, 1), (0, den_max), (5, 6), (den_max - 1, den_max),            # quotient 0
        ((1 << QUOT_W) - 1, 1), (1, 1), (7, 1), (12345, 1),               # den = 1
        (3 * ((1 << QUOT_W) - 1), 3), ((1 << QUOT_W) * 3 - 1, 3),          # quotient 2**17 - 1
        (65536 * ((1 << QUOT_W) - 1) + 65535, 65536),
        ((1 << NUM_W) - 1, den_max),                                      # the largest numerator
        (den_max, den_max), (65536 * 65536 + (1 << 25), 1 << 26),         # the softmax's extremes
        (65536 * 65536 + 32768, 65536),
    ]
    for num, den in pairs:
        assert num < den << QUOT_W and num < 1 << NUM_W
    check(pairs)


def test_random_back_to_back():
    rng = random.Random(10)
    check([random_pair(rng) for _ in range(150)])


def test_random_with_gaps():
    rng = random.Random(11)
    pairs = [random_pair(rng) for _ in range(40)]
    check(pairs, [rng.choice((0, 0, 1, 3, 20)) for _ in pairs])


def test_latency_property():
    assert Divider().latency == LATENCY
    assert DIVIDER_LATENCY == LATENCY         # the default is the cycle model's


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_stages_built_are_the_latency():
    """The divider checks at elaboration that it built as many stages as its latency says."""
    class Claims18(Divider):
        latency = 18
    assert_build_refused(lambda: Claims18(),
                         'The divider builds 17 registered stages where the cycle model '
                         '(ga2_sw.timing) needs 18')


def test_bad_widths():
    with pytest.raises(TypeError, match=r"^Divisor width must be a positive integer, not 0$"):
        Divider(den_width=0)
    with pytest.raises(ValueError, match=r"^Numerator width must be at least the quotient width \(17\), not 8$"):
        Divider(num_width=8)


def test_verilog():
    """Module `divider` with its operand and quotient widths, deterministic, lint clean."""
    text = unit_verilog(Divider, "divider")
    ports, _ = verilog_ports(text, "divider")
    assert (ports["num"], ports["den"], ports["quot"]) == (("input", NUM_W), ("input", DEN_W), ("output", QUOT_W))
