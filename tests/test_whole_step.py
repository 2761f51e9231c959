"""SmolLM2-135M's whole decode step as chip programs (``ga2_sw.llm.whole_step``, ``ga2 llm throughput``): each
product's program against numpy, every weight read once a step, the bounds worked by hand, and one block of a
step on Verilator against the reference machine and the cycle model."""

import json
import subprocess
import sys

import numpy as np
import pytest

from ga2_sw.chips import config_of
from ga2_sw.cycles import cycle_counts
from ga2_sw.isa import Op, footprints
from ga2_sw.llm.whole_step import (MODEL, Host, Product, attention_pieces, head_product, bounds, linear_image,
                                   linear_outputs, linear_pieces, linear_program, step_cost, step_phases, weight_pitch,
                                   program_counters)
from ga2_sw.machine import Machine
from ga2_sw.online_program import grouped_ext_image

LLM = config_of("llm")
# A block of SmolLM2's shape, made small: one key/value head of 64, a d_model of 128 and an MLP of 256; a vocabulary
# of 512. Small enough for a simulator, every kind of program of the real step in it.
SMALL = {"blocks": 1, "d_model": 128, "heads": 3, "kv_heads": 1, "d": 64, "d_ff": 256, "vocab": 512}
# SmolLM2-135M's weights read per token (30 blocks of 3,538,944 and the tied LM head's 49,152 x 576), as the
# model file's tensors add up (tests/test_llm_ga2.py's denominator of the on-chip fraction).
WEIGHTS_PER_TOKEN = 134_479_872


def requantised(W, X, m, s):
    """numpy's int8 outputs of ``W x`` for each row of X: (x m + 2^(s-1)) >> s, saturated (docs/ISA.md, RQ)."""
    return np.clip((X.astype(np.int64) @ W.T.astype(np.int64) * m + (1 << (s - 1))) >> s, -128, 127)


@pytest.mark.parametrize("batch,rows,cols,group", [(1, 16, 64, 1), (3, 40, 576, 2), (4, 64, 128, 4),
                                                  (5, 48, 1536, 1), (10, 33, 576, 2)])
def test_a_product_is_numpy(batch, rows, cols, group):
    """Every tile's outputs requantised and stored, ``group`` tiles at a time (the last group short where the
    tiles do not divide); batches over the array's rows (two MMs a tile), a last tile narrower than the array, a
    row of 1,536 (the down projection's, 1,600 bytes apart in external memory)."""
    rng = np.random.default_rng(rows * cols + batch)
    W = rng.integers(-128, 128, (rows, cols))
    X = rng.integers(-128, 128, (batch, cols))
    m = 5
    s = int(np.abs(X @ W.T).max() * m).bit_length() - 7     # the largest output near 64: the int8 range used
    program = linear_program(LLM, batch, Product("p", rows, cols), (m, s), group=group)
    result = Machine(LLM).run(program, linear_image(W, X, LLM))
    assert result.ok, result.error
    want = requantised(W, X, m, s)
    assert np.array_equal(linear_outputs(result.ext, LLM, batch, rows, cols), want)
    assert len(np.unique(want)) > min(20, want.size // 2)     # not a saturated or all-zero product
    assert result.counters == cycle_counts(program, LLM)[0]


@pytest.mark.parametrize("batch,digits,rows,cols,group", [(1, 2, 16, 64, 1), (2, 2, 40, 576, 2),
                                                          (3, 1, 33, 1536, 4), (4, 2, 48, 128, 3)])
def test_a_product_s_int32_sums_are_numpy(batch, digits, rows, cols, group):
    """The sums stored whole (ST wd) for each input row, the digit rows of a token next to each other: numpy's
    int64 product of the int8 rows; two digits recombine (high x 128 + low) to the 15-bit input's product."""
    rng = np.random.default_rng(rows + cols + digits)
    W = rng.integers(-128, 128, (rows, cols))
    x = rng.integers(-127 * 128, 127 * 128 + 1, (batch, cols))
    high = np.where(x >= 0, (x + 64) // 128, -((-x + 64) // 128))
    X = np.stack([high, x - 128 * high], axis=1).reshape(batch * 2, cols) if digits == 2 else x % 256 - 128
    program = linear_program(LLM, batch, Product("p", rows, cols), digits=digits, sums=True, group=group)
    result = Machine(LLM).run(program, linear_image(W, X, LLM))
    assert result.ok, result.error
    got = linear_outputs(result.ext, LLM, batch * digits, rows, cols, sums=True)
    assert np.array_equal(got, X @ W.T)
    if digits == 2:
        assert np.array_equal(got[0::2] * 128 + got[1::2], x @ W.T)
    assert np.abs(got).max() > 1 << 16                    # sums beyond 16 bits: the whole words were stored
    assert result.counters == cycle_counts(program, LLM)[0]
    with pytest.raises(ValueError, match="st_words"):
        linear_program(config_of("llm", st_words=0), batch, Product("p", rows, cols), sums=True)


@pytest.mark.parametrize("batch,rows,cols", [(2, 40, 576), (9, 33, 1536)])
def test_one_tile_buffer_loads_each_tile_after_the_mms_of_the_one_before(batch, rows, cols):
    """With one weight buffer (``buffers`` = 1) every tile's LD comes after the MMs of the tile before, which
    read the same words: the reference machine, one instruction after the other, gives numpy's sums only in
    that order, and the cycle model its counters."""
    rng = np.random.default_rng(batch + rows)
    W, X = rng.integers(-128, 128, (rows, cols)), rng.integers(-128, 128, (batch, cols))
    program = linear_program(LLM, batch, Product("p", rows, cols), sums=True, buffers=1)
    result = Machine(LLM).run(program, linear_image(W, X, LLM))
    assert result.ok, result.error
    assert np.array_equal(linear_outputs(result.ext, LLM, batch, rows, cols, sums=True), X @ W.T)
    assert result.counters == cycle_counts(program, LLM)[0]
    ops = [i.op for i in program]
    first_mm = ops.index(Op.MM)
    assert ops[first_mm:].index(Op.LD) == -(-batch // LLM.rows)          # the tile's MMs, then the next tile's LD
    with pytest.raises(ValueError, match="1 or 2 buffers"):
        linear_program(LLM, batch, Product("p", rows, cols), sums=True, buffers=3)


def test_down_at_b8_takes_one_tile_buffer_and_every_other_product_two():
    """B = 8 on the llm chip: down's 16 input rows of 1,536 (1,600 words apart) and two tiles of 16 weight rows
    are 76,800 words, more than the 65,536-word scratchpad, so its tiles share one buffer; every other product
    of the step keeps two (each LD before the MMs of the tile before)."""
    down = Product("down", 576, 1536)
    assert 16 * 1600 + 2 * 16 * 1600 > LLM.sp_words >= 16 * 1600 + 16 * 1600
    for product in (down, Product("gate", 1536, 576), head_product()):
        for _, rows, program in linear_pieces(LLM, 8, product, digits=2):
            weights = rows * weight_pitch(product.cols, LLM)             # the weights lie first, then the inputs
            buffers = {i.dst for i in program if i.op == Op.LD and i.src < weights}
            assert len(buffers) == (1 if product is down else 2), product.name


def test_the_head_is_split_into_pieces_that_fit_and_cover_it():
    head = head_product()
    pieces = linear_pieces(LLM, 8, head)
    assert len(pieces) > 1
    assert [r0 for r0, _, _ in pieces] == list(np.cumsum([0] + [n for _, n, _ in pieces[:-1]]))
    assert sum(n for _, n, _ in pieces) == head.rows
    for _, n, program in pieces:
        assert len(program) <= LLM.imem_words
        assert max(hi for i in program for _, hi in footprints(i)[0]) < LLM.sp_words
        assert max(hi for i in program for _, hi in footprints(i)[1]) < LLM.ext_words


@pytest.mark.parametrize("batch,digits", [(1, 2), (2, 2), pytest.param(4, 1, marks=pytest.mark.slow)])
def test_a_product_s_results_leave_in_groups_of_tiles_and_its_weights_in_one_ld_a_tile(batch, digits):
    """Each program of a step stores its results in as few STs as up to 512 results an ST and up to 16 tiles a
    group allow, and loads each tile of weights (rows 1,600 bytes apart for down, as in the scratchpad) with one
    LD."""
    for p in step_phases(LLM, [64] * batch, digits=digits):
        if p.name == "attention":
            continue
        cols = MODEL["d_ff"] if p.name == "down" else MODEL["d_model"]
        tiles = -(-(p.weights // cols) // LLM.cols)
        stores = [i for i in p.program if i.op == Op.ST]
        tile_words = batch * digits * LLM.cols
        group = max(g for g in (1, 2, 4, 8, 16) if g * tile_words <= 512)     # on the llm chip every one fits
        assert max(i.len for i in stores) == min(group, tiles) * tile_words, p.name
        assert len(stores) == -(-tiles // group), p.name
        input_lds = 1 if cols == 576 else batch * digits        # the input's rows 1,600 apart on chip
        assert sum(i.op == Op.LD for i in p.program) == tiles + input_lds, p.name


def test_a_chip_too_small_for_one_tile_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"qkv \(960 x 576\) for a batch of 1 does not fit the chip's memories"):
        step_phases(config_of("llm", sp_words=8192), [1])


def _weight_reads(program, rows, cols, pitch):
    """How many times each weight byte is read by the program's LDs: weight row ``r`` at external bytes
    ``r pitch .. r pitch + cols`` (the bytes between rows are never a weight)."""
    reads = np.zeros(rows * pitch, dtype=np.int64)
    for i in program:
        if i.op == Op.LD:
            for lo, hi in footprints(i)[1]:
                reads[lo:min(hi + 1, rows * pitch)] += 1     # footprints are inclusive
    return reads.reshape(rows, pitch)[:, :cols]


@pytest.mark.parametrize("batch,digits", [(1, 2), (4, 2), pytest.param(8, 1, marks=pytest.mark.slow)])
def test_a_step_reads_every_weight_once_whatever_the_batch(batch, digits):
    phases = step_phases(LLM, [64] * batch, digits=digits)
    assert sum(p.repeat * p.weights for p in phases) == WEIGHTS_PER_TOKEN
    for p in phases:
        if p.name != "attention":
            rows = p.weights // (MODEL["d_model"] if p.name != "down" else MODEL["d_ff"])
            cols = p.weights // rows
            assert (_weight_reads(p.program, rows, cols, weight_pitch(cols, LLM)) == 1).all(), p.name
    assert {p.name for p in phases} == {"qkv", "attention", "o", "gate", "up", "down", "head"}
    assert all(p.repeat == MODEL["blocks"] for p in phases if p.name != "head")


def test_the_bounds_worked_by_hand():
    """B = 1 at 64 tokens: 134,479,872 weight bytes and 30 x 64 x 384 KV bytes over a DDR3-800's 16 bytes a
    100 MHz cycle; the MACs (every weight once, and the attention's 2 x 9 heads x 64 x 64 a block) over the
    8 x 16 array's 128."""
    cost = step_cost(LLM, [64])
    kv = 30 * 64 * 3 * 2 * 64
    macs = WEIGHTS_PER_TOKEN + 30 * 2 * 9 * 64 * 64
    assert (cost["weights"], cost["kv"], cost["macs"]) == (WEIGHTS_PER_TOKEN, kv, macs)
    assert bounds(LLM, cost) == (round((WEIGHTS_PER_TOKEN + kv) / 16), -(-macs // 128))


def test_wide_weights_and_keys_are_read_once_and_counted_by_hand():
    """Wide weights (two int8 planes for o, gate, up, down and the head) and wide keys (two planes of K), on the
    small block: every byte of each plane read once a step (the LDs' ranges counted byte by byte), the weights
    after q, k and v twice the int8 step's bytes, K half as many bytes again as the int8 caches' (one key/value
    head: K and V 64 tokens x 64 each, K twice), and the MACs the model's, so the compute bound is the int8
    step's."""
    phases = step_phases(LLM, [64], SMALL, weight_digits=2, key_digits=2)
    for p in phases:
        if p.name != "attention":
            cols = SMALL["d_ff"] if p.name == "down" else SMALL["d_model"]
            rows = p.weights // cols
            assert (_weight_reads(p.program, rows, cols, weight_pitch(cols, LLM)) == 1).all(), p.name

    def totals(phases):
        return {k: sum(p.repeat * getattr(p, k) for p in phases) for k in ("weights", "kv", "macs")}
    wide, plain = totals(phases), totals(step_phases(LLM, [64], SMALL))
    qkv, after = 320 * 128, 192 * 128 + 2 * 256 * 128 + 128 * 256 + 512 * 128
    assert plain["weights"] == qkv + after and wide["weights"] == qkv + 2 * after
    assert (wide["kv"], plain["kv"]) == (64 * 64 * 3, 64 * 64 * 2)
    assert wide["macs"] == plain["macs"] == qkv + after + 2 * 3 * 64 * 64
    assert bounds(LLM, wide) == (round((wide["weights"] + wide["kv"]) / 16), -(-plain["macs"] // 128))


def test_the_head_s_candidates_are_one_more_program_counted_by_hand():
    """The LM head's candidates (``ga2_path.RescoredHead``) of a batch of three, 16 a sequence: one more program
    and round trip after the head's, reading the 48 rows of 576 the host gathered (bytes in, and weights read
    once by its LDs, counted byte by byte), each row met by its own sequence's input (the MACs the model asks)."""
    plain = step_phases(LLM, [64] * 3, SMALL)
    phases = step_phases(LLM, [64] * 3, SMALL, head_candidates=16)
    [rescore] = [p for p in phases if p.name == "rescore"]
    assert [p.name for p in phases[:-1]] == [p.name for p in plain] and phases[-1] is rescore
    cols = SMALL["d_model"]
    assert (_weight_reads(rescore.program, 48, cols, weight_pitch(cols, LLM)) == 1).all()
    assert (rescore.weights, rescore.macs, rescore.repeat) == (48 * cols, 48 * cols, 1)
    assert rescore.bytes_in == 3 * 2 * cols + 48 * cols and rescore.bytes_out == 3 * 48 * 2 * 4
    cost, base = step_cost(LLM, [64] * 3, SMALL, head_candidates=16), step_cost(LLM, [64] * 3, SMALL)
    trip = Host().cycles(LLM, rescore.program, rescore.bytes_in, rescore.bytes_out)
    assert cost["cycles"] - base["cycles"] == program_counters(rescore.program, LLM)[0].cycles + trip


def test_a_sequence_too_long_for_the_chip_whole_is_split_by_its_key_value_heads():
    """On an llm chip whose instruction memory holds 256 words, the attention of sequences at 200 and 64 tokens
    (wide keys, two streams): the first's 299 instructions split by its key/value heads, one (133 instructions)
    and two (200), the second's 128 whole; every key/value head of each sequence in one piece, and the phases'
    bytes, cache reads and MACs those of the whole attention, worked by hand. A key/value head too long alone is
    refused."""
    small = config_of("llm", imem_words=256)
    pieces = attention_pieces(small, [200, 64], key_digits=2)
    assert all(len(program) <= 256 for _, program in pieces)
    assert sorted((len(lay.groups), len(program)) for lay, program in pieces) == [(1, 133), (2, 200), (3, 128)]
    assert sorted(g.length for lay, _ in pieces for g in lay.groups) == [64] * 3 + [200] * 3
    phases = [p for p in step_phases(small, [200, 64], key_digits=2) if p.name == "attention"]
    d, heads, kv_heads = 64, 9, 3
    assert sum(p.kv for p in phases) == kv_heads * 3 * (200 + 64) * d          # K's two planes and V
    assert sum(p.macs for p in phases) == 2 * heads * (200 + 64) * d
    assert sum(p.bytes_in for p in phases) == 2 * (heads + 3 * kv_heads) * d   # queries, new K (two) and V rows
    assert sum(p.bytes_out for p in phases) == 2 * 2 * heads * d               # two readings of each output
    with pytest.raises(ValueError, match="one key/value head of a sequence at 200 tokens does not fit"):
        attention_pieces(config_of("llm", imem_words=128), [200], key_digits=2)


def test_a_round_trip_counts_its_latency_program_and_bytes():
    host = Host(sync_cycles=100, load_bytes_per_cycle=4)
    assert host.cycles(LLM, [None] * 10, 64, 96) == 100 + 10 * 16 // 4 + (64 + 96) // 16
    cost, slower = step_cost(LLM, [64], host=Host(sync_cycles=0)), step_cost(LLM, [64], host=Host(sync_cycles=1000))
    programs = sum(p["programs"] for p in cost["phases"].values())
    assert slower["cycles"] - cost["cycles"] == 1000 * programs and slower["chip"] == cost["chip"]


def test_the_step_of_one_sequence_on_the_llm_chip():
    """The figures docs/LLM.md quotes for B = 1 at 64 tokens with int8 keys and head (`ga2 llm throughput
    --key-digits 1 --head-candidates 0`): the input in two digit rows, the int32 sums stored whole."""
    cost = step_cost(LLM, [64])
    assert (cost["cycles"], cost["chip"], cost["host"]) == (9_907_192, 9_571_216, 335_976)


def test_each_phase_s_busy_units_and_bytes_add_up_to_the_step():
    """A phase's DMA and vector lane are busy for its programs' instructions' busy times (``isa.OPS``; the DMA
    also while it waits on the DRAM, the stall counter), times its repeats; its matrix unit takes its MMs' own
    times less where they follow back to back and more where the vector lane takes their banks (the
    attention); its bytes and chip cycles add up to the step's."""
    from ga2_sw.cycles import busy_cycles, unit_of
    cost = step_cost(LLM, [64, 200])
    phases = cost["phases"]
    for field in ("chip", "host", "cycles", "weights", "kv"):
        assert sum(p[field] for p in phases.values()) == cost[field], field
    for phase in step_phases(LLM, [64, 200]):
        busy = {"mm": 0, "dma": 0, "vec": 0}
        for i in phase.program:
            if unit_of(i.op):
                busy[unit_of(i.op)] += busy_cycles(i, LLM)
        counters = program_counters(phase.program, LLM)[0]
        assert (counters.dma - counters.stall, counters.vec) == (busy["dma"], busy["vec"]), phase.name
        assert counters.stall > 0, phase.name           # the DRAM is slower than the ideal memory somewhere
        assert (counters.mm > busy["mm"]) == (phase.name == "attention"), phase.name
    qkv = program_counters(step_phases(LLM, [64, 200])[0].program, LLM)[0]
    assert (phases["qkv"]["dram_wait"], phases["qkv"]["dma"]) == (30 * qkv.stall, 30 * qkv.dma)
    assert phases["attention"]["vector"] > 0 and all(phases[n]["vector"] == 0 for n in ("qkv", "o", "head"))
    assert all(max(p["matrix"], p["dma"], p["vector"]) <= p["chip"] for p in phases.values())


def test_two_input_digits_need_a_chip_that_stores_sums():
    with pytest.raises(ValueError, match="st_words = 1"):
        step_phases(config_of("llm", st_words=0), [64], digits=2)
    assert step_cost(config_of("llm", st_words=0), [64])["cycles"] == 9_708_404     # int8 in, RQ, int8 out


def run_ga2(*argv):
    return subprocess.run([sys.executable, "-m", "ga2_cli", *argv], capture_output=True, text=True)


def test_throughput_command_json(tmp_path):
    """A batch asked for that does not fit the chip (B = 16 on the llm chip) is named and left out."""
    out = tmp_path / "t.json"
    r = run_ga2("llm", "throughput", "--batches", "2,16", "--contexts", "64", "--no-progress", "--phases", "--json",
                str(out), "--phases-plot", str(tmp_path / "phases.png"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "phases.png").stat().st_size > 0
    assert "Where the cycles of B = 2 at 64 tokens go:" in r.stdout
    assert [line.split()[0] for line in r.stdout.split("go:")[1].strip().splitlines()[2:10]] == \
        ["qkv", "attention", "o", "gate", "up", "down", "head", "rescore"]
    assert "(B = 16 left out: down (576 x 1536) for a batch of 16 does not fit" in r.stdout
    data = json.loads(out.read_text())
    assert data["chip"] == "llm" and data["memory"] == "ddr3-800"
    for row in data["rows"]:
        assert row["fraction_of_bound"] == round(max(row["dram_bound_cycles"], row["compute_bound_cycles"]) /
                                                 row["cycles"], 4)
        clock = data["fmax_mhz"] or data["clock_mhz"]
        assert row["tokens_per_s"] == round(row["batch"] * clock * 1e6 / row["cycles"], 3)
    assert [(r["batch"], r["context"]) for r in data["rows"]] == [(2, 64)]
    assert [row["batch"] for row in data["left_out"]] == [16]
    assert (data["weight_digits"], data["key_digits"], data["input_digits"], data["head_candidates"]) == (1, 2, 2, 16)


@pytest.mark.parametrize("argv,words", [
    (["--batches", "0"], "--batches"),
    (["--contexts", "5000"], "--contexts"),
    (["--weight-digits", "3"], "--weight-digits"),
    (["--key-digits", "0"], "--key-digits"),
    (["--head-candidates", "-1"], "--head-candidates"),
    (["--head-candidates", "1025"], "0..1024"),
    (["--chip", "chapter"], "online unit"),
    (["--phases-plot", "phases.txt"], "--phases-plot"),
    (["--batches", "16", "--contexts", "4096"], "--batches 16"),
])
def test_throughput_refuses_bad_input_in_one_line(argv, words):
    r = run_ga2("llm", "throughput", "--no-progress", *argv)
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def _images(phase, config, rng):
    """A random external memory image for one of a step's programs."""
    if phase.name == "attention":
        lay = phase.layout
        data = [(rng.integers(-128, 128, (len(g.scores), lay.d)), rng.integers(-128, 128, (g.length, lay.d)),
                 rng.integers(-128, 128, (g.length, lay.d))) for g in lay.groups]
        return grouped_ext_image(lay, data)
    cols = SMALL["d_ff"] if phase.name == "down" else SMALL["d_model"]
    rows = phase.weights // cols
    B = phase.bytes_in // cols
    return linear_image(rng.integers(-128, 128, (rows, cols)), rng.integers(-12, 12, (B, cols)), config)


@pytest.mark.slow
def test_one_block_of_a_step_on_verilator():
    """Every program of a (small) block's step and its LM head, two sequences at 70 and 130 tokens, on Verilator:
    memory and counters equal to the reference machine's and the cycle model's."""
    from sim.backends import get_backend
    from sim.compare import compare_results
    reason = get_backend("verilator").unavailable_reason()
    if reason:
        pytest.skip(reason)
    rng = np.random.default_rng(7)
    phases = step_phases(LLM, [70, 130], SMALL)
    jobs = [(list(p.program), _images(p, LLM, rng)) for p in phases]
    results = get_backend("verilator").run_many(LLM, jobs)
    for p, (program, ext), got in zip(phases, jobs, results):
        want = Machine(LLM).run(program, ext)
        assert want.ok, (p.name, want.error)
        assert not compare_results(want, got), p.name
        assert got.counters == cycle_counts(program, LLM)[0], p.name
