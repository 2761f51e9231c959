"""Prefill (ga2_sw/prefill.py, `ga2 prefill`): a prompt's T tokens through one head in one program.

The program's outputs and caches are held to two references that share nothing with the builder: the decode
step's plain-Python integer reference at every token (prefill's output at token t IS the decode step's at t,
the causal mask included) and a numpy rendering of docs/ISA.md's formulas; the simulators to the reference
machine on memories and all six counters."""

import json

import numpy as np
import pytest

from ga2_sw import decode, isa, prefill
from ga2_cli import main
from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.machine import Machine
from sim.backends import get_backend
from sim.compare import compare_results


def sized(config, tokens):
    """``config`` with the memories and context a ``tokens``-token prefill needs."""
    shaped = config.replace(max_ctx=tokens, sm_max_len=max(tokens, config.sm_max_len), sp_words=65536,
                            ext_words=1 << 20, imem_words=65536)
    sp, ext, length = prefill.needed_config(shaped, tokens)
    return shaped.replace(sp_words=sp, ext_words=ext, imem_words=length)


def build(config, tokens, seed=5):
    config = sized(config, tokens)
    w = decode.make_workload(config, 1, tokens, seed)
    P = decode.rq_params(w)
    lay = prefill.PrefillLayout(config, tokens)
    prog = prefill.program(config, tokens, P, lay)
    return config, w, P, lay, prog, prefill.ext_image(w, lay)


SHAPES = [  # (rows, cols, tokens, d, d_model, mode, banks): packed and padded rows, partial blocks and tiles
    (4, 4, 16, 16, 16, "inorder", 8),
    (4, 4, 16, 16, 16, "decoupled", 8),
    (2, 2, 7, 8, 16, "decoupled", 4),
    (4, 4, 13, 12, 20, "decoupled", 8),
    (4, 2, 9, 6, 10, "inorder", 8),
    (8, 8, 20, 16, 24, "decoupled", 16),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])) + "-" + s[5])
def test_prefill_equals_the_decode_steps_reference_at_every_token(shape):
    rows, cols, T, d, dm, mode, banks = shape
    config, w, P, lay, prog, ext = build(Config(rows=rows, cols=cols, d=d, d_model=dm, mode=mode, sp_banks=banks), T)
    # A scratchpad left full of an earlier program's words: the prefill must not read what it did not write.
    leftovers = [int(v) for v in np.random.default_rng(T).integers(0, 1 << 32, config.sp_words, dtype=np.uint64)]
    r = Machine(config).run(prog, ext, sp=leftovers)
    assert r.ok, r.error
    got = prefill.results(lay, r.ext)
    for t in range(1, T + 1):
        assert list(got["out"][t - 1]) == decode.int_reference(w, 0, t), t
    want = prefill.reference(w, P, T)
    for name in ("out", "k", "v"):
        assert np.array_equal(got[name], want[name]), name
    assert r.counters == cycle_counts(prog, config)[0]


@pytest.mark.parametrize("shape", [s for s in SHAPES if s[5] == "decoupled"],
                         ids=lambda s: "x".join(map(str, s[:5])))
def test_decoupled_layouts_both_compute_the_prefill(shape):
    """Decoupled, every query block gets its own buffers where they fit (the shapes above run that order);
    with two (block b + 2 reusing block b's, the order used where they do not fit) the program computes the
    same, and the cycle model matches the reference machine's counters."""
    rows, cols, T, d, dm, mode, banks = shape
    config, w, P, lay, prog, ext = build(Config(rows=rows, cols=cols, d=d, d_model=dm, mode=mode, sp_banks=banks), T)
    assert lay.block_buffers and lay.buffers == -(-T // rows)
    two = prefill.PrefillLayout(config, T, buffers=2)
    assert not two.block_buffers and two.sp_needed < lay.sp_needed
    prog2 = prefill.program(config, T, P, two)
    assert prog2 != prog
    r = Machine(config).run(prog2, prefill.ext_image(w, two))
    assert r.ok, r.error
    got, want = prefill.results(two, r.ext), prefill.reference(w, P, T)
    for name in ("out", "k", "v"):
        assert np.array_equal(got[name], want[name]), name
    assert r.counters == cycle_counts(prog2, config)[0]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])) + "-" + s[5])
def test_each_projection_word_is_requantised_once(shape):
    """Decoupled, packed projections are requantised a block of rows per RQ: together the RQs cover every word
    of Q, K and V transposed once, and nothing past their rows (words past them are written later, so no
    output would show a stray RQ)."""
    rows, cols, T, d, dm, mode, banks = shape
    config, w, P, lay, prog, ext = build(Config(rows=rows, cols=cols, d=d, d_model=dm, mode=mode, sp_banks=banks), T)
    words = {}
    for base, stride, n, length in ((lay.Q, lay.lq, T, d), (lay.K, lay.lk, T, d), (lay.VT, lay.lvt, d, T)):
        for r in range(n):
            words.update({a: 0 for a in range(base + r * stride, base + r * stride + length)})
    regions = [(lay.Q, lay.K), (lay.K, lay.VT), (lay.VT, lay.WT(0))]
    for i in prog:
        if i.op == isa.Op.RQ and any(lo <= i.src < hi for lo, hi in regions):
            for a in range(i.src, i.src + i.len):
                assert a in words, (i, a)
                words[a] += 1
    assert set(words.values()) == {1}


def test_block_buffers_only_where_they_fit():
    """One buffer per query block only decoupled and where the scratchpad holds them; else two."""
    config = sized(Config(rows=4, cols=4, d=16, d_model=16, mode="decoupled"), 16)
    assert prefill.PrefillLayout(config, 16).buffers == 4
    two = prefill.PrefillLayout(config, 16, buffers=2).sp_needed
    assert prefill.PrefillLayout(config.replace(sp_words=-(-two // 8) * 8), 16).buffers == 2
    assert prefill.PrefillLayout(config.replace(mode="inorder"), 16).buffers == 2
    with pytest.raises(prefill.PrefillError, match="at least 2"):
        prefill.PrefillLayout(config, 16, buffers=1)


def test_the_8x8_prefill_reaches_70_percent_of_its_peak():
    """The prefill target, from the cycle model (the simulators are held to it above and by `ga2
    prefill --sim verilator`, docs/PREFILL.md): T = 64, d = 64 on the decoupled 8 x 8 with 32 banks, 4 bytes
    a beat and row writes, d_model 256: 66,345 cycles, 81% of 64 MACs a cycle (69% with 16 banks, where the
    vector lane's reads and writes take banks a slice's 16 operands need)."""
    config = Config(rows=8, cols=8, mode="decoupled", d=64, d_model=256, sp_banks=32, bus_bytes=4, row_writes=1,
                    sm_max_len=64, max_ctx=64).with_largest_memories()
    prog = prefill.program(config, 64, {key: (1, 0) for key in ("q", "k", "v", "scores", "weights", "out")})
    cycles = cycle_counts(prog, config)[0].cycles
    assert cycles == 66_345
    array_macs, _ = decode.traffic(prog)                     # the command's figure: 81.0%
    assert array_macs / (cycles * 64) >= prefill.useful_macs(config, 64) / (cycles * 64) >= 0.80


def test_numpy_reference_equals_the_plain_python_one():
    """The reference the command uses at large shapes, against decode.int_reference, on a head whose scores
    and weights are not trivial (several weights nonzero per row)."""
    config = sized(Config(rows=4, cols=4, d=16, d_model=16), 16)
    w = decode.make_workload(config, 1, 16, 11)
    P = decode.rq_params(w)
    want = prefill.reference(w, P, 16)
    for t in range(1, 17):
        assert list(want["out"][t - 1]) == decode.int_reference(w, 0, t)
    assert (np.count_nonzero(want["out"]) > want["out"].size // 2)


def test_the_causal_mask_matters():
    """Each row's softmax over its own t + 1 keys is the mask: the same program with every row's score RQ, SM
    and weight RQ over all of its block's keys computes something else, and the references see it."""
    T = 8
    config, w, P, lay, prog, ext = build(Config(rows=4, cols=4, d=8, d_model=8, mode="inorder"), T)
    rows_region = range(lay.S(0), lay.S(1) + config.rows * lay.ls)
    unmasked = []
    for i in prog:
        if i.op in (isa.Op.RQ, isa.Op.SM) and i.src in rows_region:
            keys = min(T, -(-i.len // config.rows) * config.rows)      # its block's last key + 1
            i = isa.Instr(i.op, **{**dict(i.fields()), "len": keys})
        unmasked.append(i)
    assert unmasked != prog
    r = Machine(config).run(unmasked, ext)
    assert r.ok
    assert not np.array_equal(prefill.results(lay, r.ext)["out"], prefill.reference(w, P, T)["out"])


@pytest.mark.parametrize("shape", [(4, 4, 64, 64, 64, 8), (8, 8, 64, 64, 64, 16), (2, 2, 30, 10, 18, 4),
                                   (4, 4, 17, 24, 40, 8)])
def test_decoupled_layout_reads_every_slice_in_one_cycle(shape):
    """rows and cols at most half the banks: no MM of the prefill loses a cycle to a bank conflict."""
    rows, cols, T, d, dm, banks = shape
    config = sized(Config(rows=rows, cols=cols, d=d, d_model=dm, mode="decoupled", sp_banks=banks), T)
    w = decode.make_workload(config, 1, T, 1)
    prog = prefill.program(config, T, decode.rq_params(w))
    assert sum(i.op == isa.Op.MM for i in prog) > 10
    assert prefill.bank_conflict_cycles(prog, config) == 0


def test_needed_config_is_what_the_program_takes():
    config = sized(Config(rows=4, cols=4, d=12, d_model=20, mode="decoupled"), 13)
    _, _, length = prefill.needed_config(config, 13)
    w = decode.make_workload(config, 1, 13, 1)
    assert len(prefill.program(config, 13, decode.rq_params(w))) == length == config.imem_words
    with pytest.raises(prefill.PrefillError, match="imem_words"):
        prefill.program(config.replace(imem_words=length - 1), 13, decode.rq_params(w))
    with pytest.raises(prefill.PrefillError, match="sp_words"):
        prefill.program(config.replace(sp_words=1024), 13, decode.rq_params(w))


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
def test_pysim_runs_a_prefill_as_the_model_does(mode):
    config, w, P, lay, prog, ext = build(Config(rows=2, cols=2, d=4, d_model=6, mode=mode, sp_banks=4), 5)
    (got,) = get_backend("pysim").run_many(config, [(prog, ext)])
    assert not compare_results(Machine(config).run(prog, ext), got)
    assert np.array_equal(prefill.results(lay, got.ext)["out"], prefill.reference(w, P, 5)["out"])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
def test_verilator_runs_a_prefill_as_the_model_does(mode):
    if get_backend("verilator").unavailable_reason():
        pytest.skip(get_backend("verilator").unavailable_reason())
    config, w, P, lay, prog, ext = build(Config(rows=4, cols=4, d=16, d_model=16, mode=mode), 16)
    (got,) = get_backend("verilator").run_many(config, [(prog, ext)])
    assert not compare_results(Machine(config).run(prog, ext), got)


def test_command_json_and_refusals(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["prefill", "--rows", "2", "--cols", "2", "--tokens", "6", "--d", "4", "--d-model", "8",
                 "--sp-banks", "4", "--json", str(out)]) == 0
    row = json.loads(out.read_text())
    assert {"cycles", "macs", "macs_per_cycle", "peak_macs_per_cycle"} <= set(row)
    assert row["peak_macs_per_cycle"] == 4 and row["matches_reference"] and row["matches_model"]
    assert row["macs_per_cycle"] == pytest.approx(row["macs"] / row["cycles"], abs=1e-3)
    assert row["config"]["max_ctx"] == 6 and row["config"]["sp_words"] >= 32
    capsys.readouterr()
    for argv, words in ((["--sp-words", "64"], "--sp-words is 64"), (["--sm-max-len", "4"], "--sm-max-len is 4"),
                        (["--imem-words", "8"], "--imem-words is 8"), (["--max-ctx", "3"], "--max-ctx is 3")):
        assert main(["prefill", "--rows", "2", "--cols", "2", "--tokens", "6", "--d", "4", "--d-model", "8",
                     "--sp-banks", "4", "--mode", "inorder", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1, err
    assert main(["prefill", "--tokens", "0"]) == 2
    assert main(["prefill", "--tokens", "1024", "--d", "128", "--d-model", "1024"]) == 2
    assert "more than any chip has" in capsys.readouterr().err
