"""The batched decode builder: batch invariance, the chapter's traffic and cycle anchors, other array sizes,
the check-batching and accuracy commands, and the mutation test of the invariance check."""

import json
import time

import pytest

from ga2_sw import decode as dec
from ga2_sw.check import check_batching, ragged_lengths
from ga2_cli import main
from ga2_sw.chips import chip
from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.isa import Err
from ga2_sw.machine import Machine

CFG = Config()

# the chapter's decode table: (lengths, cycles on its chip, MACs, words)
CHAPTER = [
    ((16,), 3827, 1280, 1312),
    ((16, 16), 5777, 2560, 1856),
    ((16, 16, 16), 7727, 3840, 2400),
    ((16, 16, 16, 16), 9677, 5120, 2944),
    ((3, 9, 1, 14), 6452, 3936, 1760),
]


def test_a_mutant_only_the_ragged_batch_catches():
    """The default tier's part of the chapter's mutation test (the slow tier runs all 16 below): a broken
    builder that only the ragged batch catches, and one that any batch catches."""
    from ga2_sw import mutants as M
    ragged_only = next(m for m in M.CHAPTER_MUTANTS if m.label in M.NO_RAGGED_SURVIVORS)
    anyway = M.CHAPTER_MUTANTS[0]
    assert anyway.label not in M.NO_RAGGED_SURVIVORS
    (_, full_r, plain_r), (_, full_a, plain_a) = M.run_mutants([ragged_only, anyway])
    assert full_r.caught and not plain_r.caught and plain_r.status == "survived"
    assert full_a.caught and plain_a.caught


@pytest.mark.slow
def test_mutants_of_the_chapter():
    """The chapter's 16 broken builders: all caught by the full check, 13 without the ragged batch."""
    from ga2_sw import mutants as M
    start = time.perf_counter()
    rows = M.run_mutants(M.CHAPTER_MUTANTS)
    print(f"16 mutants x 2 checks: {time.perf_counter() - start:.1f} s")
    s = M.summarise(rows)
    assert (s["full"], s["no_ragged"], s["total"]) == (16, 13, 16)
    assert {m.label for m, _, n in rows if not n.caught} == M.NO_RAGGED_SURVIVORS
    assert s["problems"] == []


def test_batch_invariance_on_the_default_chip():
    start = time.perf_counter()
    problems = check_batching(CFG)
    print(f"check_batching(Config()): {time.perf_counter() - start:.1f} s")
    assert problems == []


@pytest.mark.parametrize("lengths, cycles, macs, words", CHAPTER)
def test_chapter_traffic_and_cycles(lengths, cycles, macs, words):
    w = dec.make_workload(CFG, len(lengths), 16, 4242)
    prog = dec.program(CFG, list(range(len(lengths))), list(lengths), dec.rq_params(w))
    assert dec.traffic(prog) == (macs, words)
    counters, err, _ = cycle_counts(prog, CFG)
    assert err == Err.NONE
    assert counters.cycles < cycles
    assert Machine(CFG).run(prog, dec.ext_image(w)).counters == counters


def test_traffic_formula():
    # 768 words of weights once, 544 per sequence at L = 16: 16 (x) + 2 * 15 * 16 (caches) + 2 * 16 (new
    # k, v rows) + 16 (output)
    for n in range(1, 5):
        w = dec.make_workload(CFG, n, 16, 1)
        assert dec.traffic(dec.program(CFG, list(range(n)), [16] * n, dec.rq_params(w)))[1] == 768 + 544 * n


def test_ragged_lengths():
    assert ragged_lengths(CFG) == (3, 9, 1, 14)
    assert ragged_lengths(Config(rows=2)) == (3, 9)
    assert ragged_lengths(Config(rows=8, max_ctx=8, sm_max_len=8)) == (3, 1, 1, 6, 6, 4, 2, 8)


def test_batch_invariance_on_a_2x2_array():
    assert check_batching(chip("chapter2").config, lengths=(1, 2, 5, 9, 16)) == []


def test_batch_invariance_on_an_8x8_array():
    cfg = chip("chapter8").config
    assert ragged_lengths(cfg) == (3, 9, 1, 14, 6, 12, 2, 16)
    assert check_batching(cfg, batches=(1, 3, 8), lengths=(1, 5, 16), seeds=(0,)) == []


# Batches up to R on the bigger arrays: 8x8 at B = 8 and 16x16 at B = 16 (slow), in both modes (Verilator
# runs the same in tests/test_verilator.py, and the mutation test at B = 8 is test_mutants_at_batch_8, slow).
CFG_8X8 = chip("chapter8").config
CFG_16X16 = Config(rows=16, cols=16, sp_words=16384, ext_words=32768)


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
@pytest.mark.parametrize("config", [CFG_8X8, pytest.param(CFG_16X16, marks=pytest.mark.slow)], ids=["8x8", "16x16"])
def test_batch_invariance_at_batch_r(config, mode):
    cfg = config.replace(mode=mode)
    assert len(ragged_lengths(cfg)) == cfg.rows
    assert check_batching(cfg, batches=(cfg.rows,), lengths=(1, 16), seeds=(0,)) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
def test_mutants_at_batch_8(mode):
    """The chapter's 16 mutants at B = 8 on the 8x8 chip: all caught by the full check (about 2.5 min each)."""
    from ga2_sw import mutants as M
    rows = M.run_mutants(M.CHAPTER_MUTANTS, CFG_8X8.replace(mode=mode), jobs=2, baseline=True)
    s = M.summarise(rows)
    assert (s["full"], s["total"]) == (16, 16) and s["problems"] == []


def test_batch_invariance_with_d_model_not_d():
    # d_model != d and d not a multiple of cols: strides and tiles the default chip never exercises
    cfg = Config(rows=3, cols=3, d_model=8, d=10, max_ctx=7, sm_max_len=16)
    assert check_batching(cfg, lengths=(1, 4, 7)) == []


def test_check_batching_command(capsys):
    assert main(["check-batching", "--no-progress", "--lengths", "2,5", "--seeds", "0"]) == 0
    out = capsys.readouterr().out
    assert "problems: none" in out and "ragged batch (3, 9, 1, 14)" in out
    assert main(["check-batching", "--no-progress", "--lengths", "1", "--no-ragged", "--rows", "2"]) == 0
    assert "no ragged batch" in capsys.readouterr().out


def test_check_batching_progress_total_is_exact():
    from ga2_cli.commands.batching import count_programs
    for cfg, kw in ((CFG, dict(batches=(1, 2), lengths=(1, 5), seeds=(0,), ragged=True)),
                    (Config(rows=2), dict(batches=(2,), lengths=(2, 40), seeds=(0, 1), ragged=False))):
        n = []
        assert check_batching(cfg, progress=n.append, **kw) == []
        assert count_programs(cfg, **kw) == sum(n)


def test_check_batching_unknown_simulator(capsys):
    assert main(["check-batching", "--sim", "nope"]) == 2
    err = capsys.readouterr().err
    assert "Unknown simulator 'nope'; known: model" in err


def test_accuracy_is_a_few_lsbs(tmp_path, capsys):
    from ga2_cli.commands.batching import accuracy
    res = accuracy(CFG)
    assert [r["L"] for r in res["lengths"]] == [1, 2, 5, 9, 16]
    assert res["values"] == 2 * 33 * CFG.d
    # int8 quantisation of x, W, q, k, v and the weights: a few output LSBs at most, well under 1 on average
    assert res["max"] < 8 and res["mean"] < 1.5
    assert main(["accuracy", "--json", str(tmp_path / "a.json"), "--lengths", "1,2"]) == 0
    assert "max LSB" in capsys.readouterr().out
    rows = json.loads((tmp_path / "a.json").read_text())["rows"]     # the online rows' shape
    assert [(r["path"], r["workload"], r["length"]) for r in rows] == [("chapter", "random", 1),
                                                                        ("chapter", "random", 2)]
    assert all(0 < r["mean_lsb"] <= r["max_lsb"] < 8 for r in rows)
    with pytest.raises(ValueError, match="max_ctx"):
        accuracy(CFG, lengths=[CFG.max_ctx + 1])


def test_accuracy_past_max_ctx_measures_the_long_context_numerics(tmp_path, capsys):
    """`ga2 accuracy --lengths 16,256,4096`: a length past --max-ctx is not skipped; every length goes
    through the online softmax's numerics (one row per workload and length), and --key-digits then applies."""
    out = tmp_path / "a.json"
    assert main(["accuracy", "--lengths", "16,40", "--seeds", "0", "--json", str(out)]) == 0
    assert "every length is measured with the long-context numerics" in capsys.readouterr().out
    rows = json.loads(out.read_text())["rows"]
    assert [(r["path"], r["workload"], r["length"]) for r in rows] == [
        ("online", "random", 16), ("online", "random", 40), ("online", "peaked", 16), ("online", "peaked", 40)]
    assert main(["accuracy", "--lengths", "40", "--seeds", "0", "--key-digits", "2", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["key_digits"] == 2
    # the default lengths stay the chapter's, those within --max-ctx
    assert main(["accuracy", "--max-ctx", "4", "--seeds", "0", "--json", str(out)]) == 0
    assert [r["length"] for r in json.loads(out.read_text())["rows"]] == [1, 2]


def test_mutant_anchors():
    from ga2_sw import mutants as M
    for m in M.ALL_MUTANTS:
        assert M.mutate(m) != open(f"{M.PACKAGE_DIR}/{m.file}").read()
    bad = M.Mutant("nothing", "decode.py", "this text is not in decode.py", "x")
    assert M.run_mutant(bad).status == "bad anchor"
    assert len({m.label for m in M.ALL_MUTANTS}) == len(M.ALL_MUTANTS)
    assert len(M.CHAPTER_MUTANTS) == 16 and len(M.OWN_MUTANTS) >= 6


def test_v_cache_blocks_layout():
    """The V cache's column blocks (Layout.v_block), against the layout written out by hand: in order one block
    (the chapter's rows, t * d + c); decoupled on the 4 x 4, two blocks of 8 columns, each max_ctx rows of 8."""
    from ga2_sw.layout import Layout
    inorder, decoupled = Layout(Config()), Layout(Config(mode="decoupled"))
    assert inorder.v_block == 16 and decoupled.v_block == 8
    for t in range(16):
        for c in range(16):
            assert inorder.v_at(t, c) == t * 16 + c
            assert decoupled.v_at(t, c) == (128 if c >= 8 else 0) + t * 8 + c % 8
    # a block must hold whole column tiles of the array, else one block of d (a 4 x 4 with d = 12: 6 % 4)
    assert Layout(Config(mode="decoupled", d=12, d_model=12)).v_block == 12
    assert Layout(chip("decoupled8").config).v_block == 8


def test_weights_transposed_decoupled():
    """Decoupled, each weight matrix is stored transposed (row r, column c at c * d_model + r), in order as the
    chapter's rows (r * d + c): the two modes' images hold the same weights."""
    from ga2_sw.layout import Layout
    inorder, decoupled = Config(), Config(mode="decoupled")
    a, b = (dec.ext_image(dec.make_workload(c, 4, 16, 7)) for c in (inorder, decoupled))
    base, dm, d = Layout(inorder).ex_w, inorder.d_model, inorder.d
    assert Layout(decoupled).ex_w == base
    for wi in range(3):
        for r in range(dm):
            for c in range(d):
                assert b[base + wi * dm * d + c * dm + r] == a[base + wi * dm * d + r * d + c]
    assert dec.row_major_ext(decoupled, b)[:3 * dm * d] == a[:3 * dm * d]


def _bank_load(mm, k):
    """The most operands of slice k of ``mm`` on one of 8 banks, bank (a + (a >> 3)) mod 8, written from
    docs/ARCHITECTURE.md (not from ga2_sw.banking)."""
    addrs = [mm.A + i * mm.lda + k for i in range(mm.M)]
    addrs += [mm.B + (j * mm.ldb + k if mm.tb else k * mm.ldb + j) for j in range(mm.N)]
    banks = [(a + (a >> 3)) % 8 for a in addrs]
    return max(banks.count(x) for x in banks)


def test_operands_placed_on_the_banks():
    """On the chip's 8 banks, the decode programs' projections and scores never put two operands of a slice on
    one bank (the weights transposed, W and WT padded: layout.bank_pads); only the P V products meet, two on a
    bank at most, 374 extra slice cycles in all (the figure docs/ARCHITECTURE.md gives)."""
    from ga2_sw.isa import Op
    from ga2_sw.layout import Layout
    from ga2_sw.workloads import decode_table_programs
    cfg = Config(mode="decoupled")
    lay = Layout(cfg)
    assert cfg.sp_banks == 8 and Layout(Config()).pads == (0, 0, 0)
    assert all(p % cfg.sp_banks == 0 for p in lay.pads)
    extra = {"projection": 0, "score": 0, "pv": 0}
    worst = dict(extra)
    for prog in decode_table_programs(cfg):
        for mm in prog.program:
            if mm.op != Op.MM:
                continue
            kind = "projection" if mm.A == lay.X else "score" if mm.tb else "pv"
            loads = [_bank_load(mm, k) for k in range(mm.K)]
            extra[kind] += sum(n - 1 for n in loads)
            worst[kind] = max(worst[kind], *loads)
    assert extra == {"projection": 0, "score": 0, "pv": 374}
    assert worst == {"projection": 1, "score": 1, "pv": 2}


def test_a_pad_moves_a_region_by_whole_banks():
    """What bank_pads' search relies on: adding m * Nb to an address adds m to its bank, for every address."""
    from ga2_sw.banking import bank_of
    for nb in (4, 8, 16):
        cfg = Config(mode="decoupled", sp_banks=nb)
        for a in range(0, 2048, 3):
            for m in range(nb):
                assert bank_of(a + m * nb, cfg) == (bank_of(a, cfg) + m) % nb


def test_batch_invariance_decoupled_on_a_2x2_array():
    """Decoupled, a V-cache block holds four column tiles of the 2 x 2 array."""
    cfg = Config(rows=2, cols=2, mode="decoupled")
    assert check_batching(cfg, lengths=(1, 2, 9, 16)) == []


@pytest.mark.slow
def test_v_block_mutants_are_caught_decoupled():
    """The builder's V-block code is one block in order (its mutants are equivalent there); the decoupled
    check catches each of them."""
    from ga2_sw import mutants as M
    chosen = list(M.V_BLOCK_MUTANTS)
    assert [m.label for m in chosen] == ["the second V-cache block is loaded over the first",
                                         "every block of the new value row takes the first block's columns",
                                         "P V reads the V cache with the row stride d of one block"]
    rows = M.run_mutants(chosen, Config(mode="decoupled"), jobs=2, baseline=True)
    assert rows[0][1].status == "survived"
    assert [(m.label, f.status) for m, f, _ in rows[1:]] == [(m.label, "caught") for m in chosen]


@pytest.mark.slow
def test_row_b_attention_mutants_are_caught_on_a_row_b_chip():
    """The builder's tiles a row (MM's rb and sa, decode.column_tiles) exist only on row_b chips: each of its
    mutants is caught on a row_b chip, where the check holds the step to the integer reference (and survives
    without row_b, where it is equivalent: the slow test below)."""
    from ga2_sw import mutants as M
    chosen = list(M.ROW_B_MUTANTS)
    assert len(chosen) == 3
    rows = M.run_mutants(chosen, Config(mode="decoupled", row_b=1, sp_banks=32), jobs=2, baseline=True)
    assert rows[0][1].status == "survived"
    assert [(m.label, f.status) for m, f, _ in rows[1:]] == [(m.label, "caught") for m in chosen]


@pytest.mark.slow
def test_row_b_attention_mutants_are_equivalent_without_row_b():
    """The same mutants survive on the decoupled chip without row_b, where the builder makes no tile a row."""
    from ga2_sw import mutants as M
    plain = M.run_mutants(list(M.ROW_B_MUTANTS)[:2], Config(mode="decoupled"), jobs=2)
    assert [f.status for _, f, _ in plain] == ["survived", "survived"]
