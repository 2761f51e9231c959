"""The combined-sums what-if (sim/sums_whatif.py): where the sum 128 x high + low stays exact in int32 (worked
out with numpy's int64 on the worst inputs), which stores and host bytes it halves, and that it leaves the
builders as they were."""

import numpy as np
import pytest

from ga2_sw.chips import config_of
from ga2_sw.isa import Op
from ga2_sw.llm import whole_step
from ga2_sw.llm.ga2_path import INPUT_LIMIT, INPUT_RADIX, input_digits
from sim.sums_whatif import K_MAX, combined, patched

LLM = config_of("llm")


def _worst_sum(K):
    """The largest |sum| of K products of an int8 weight and a 15-bit input, and of INPUT_RADIX x the high
    digits' sum plus the low digits', in int64."""
    w = np.full(K, -128, dtype=np.int64)
    x = np.full(K, -INPUT_LIMIT, dtype=np.int64)
    high, low = input_digits(x)
    return abs(int(w @ x)), abs(int(INPUT_RADIX * (w @ high) + (w @ low)))


def test_the_combined_sum_fits_int32_up_to_k_max_and_no_further():
    assert _worst_sum(K_MAX)[0] <= 2 ** 31 - 1 and _worst_sum(K_MAX)[1] <= 2 ** 31 - 1
    assert _worst_sum(K_MAX + 1)[0] > 2 ** 31 - 1
    assert combined(576, 2) and not combined(1536, 2) and not combined(576, 1)     # down keeps its two sums


def _stored_words(program):
    return sum(i.len for i in program if i.op == Op.ST and i.wd)


@pytest.mark.parametrize("name, halved", [("gate", True), ("down", False)])
def test_the_stores_of_a_product_of_k_up_to_k_max_are_halved(name, halved):
    product = next(p for p in whole_step.block_products() if p.name == name)
    built = whole_step.linear_program(LLM, 2, product, digits=2, sums=True, group=2)
    with patched():
        faster = whole_step.linear_program(LLM, 2, product, digits=2, sums=True, group=2)
    assert _stored_words(built) == 2 * 2 * product.rows                           # B x 2 digit rows, every row
    assert _stored_words(faster) == _stored_words(built) // (2 if halved else 1)
    assert [i for i in faster if i.op != Op.ST] == [i for i in built if i.op != Op.ST]


def test_the_host_reads_half_of_a_combined_product_s_bytes():
    built = whole_step.step_phases(LLM, [64], digits=2)
    with patched():
        faster = whole_step.step_phases(LLM, [64], digits=2)
    assert [p.name for p in faster] == [p.name for p in built]
    for b, f in zip(built, faster):
        combinable = b.name in ("qkv", "o", "gate", "up", "head")
        assert f.bytes_out == (b.bytes_out // 2 if combinable else b.bytes_out), b.name
        assert (f.bytes_in, f.weights, f.macs) == (b.bytes_in, b.weights, b.macs)


def test_the_builders_are_restored_even_after_an_error():
    program, phases = whole_step.linear_program, whole_step.step_phases
    with pytest.raises(RuntimeError):
        with patched():
            assert whole_step.linear_program is not program
            raise RuntimeError("inside")
    assert (whole_step.linear_program, whole_step.step_phases) == (program, phases)
