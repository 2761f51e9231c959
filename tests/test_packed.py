"""Packed external memory (``Config.bus_bytes`` > 1, ga2_sw/packing.py, docs/ISA.md "Packed external memory"):
the reference machine against a numpy reading of the rules, the beat count against counting beats, the chip on
pysim, Verilator and Icarus against the machine (memories and all six counters) at 4, 8 and 16 bytes per beat,
and the decode steps' outputs through a packed port against the integer reference. ST of whole words (``wd``,
``Config.st_words``) the same way, on the bare port and on AXI4."""

import random

import numpy as np
import pytest

from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.isa import Op, halt, ld, st
from ga2_sw.machine import run
from ga2_sw.packing import beats

from sim.backends import get_backend
from sim.compare import compare_results, format_program
from sim.random_programs import FUZZ_CONFIG

# The fuzz chip (sim.random_programs.FUZZ_CONFIG) decoupled, with twice as many banks as a beat has bytes (at
# least the default 8): the builds are shared with the differential tests' packed chips.
PACKED = {w: FUZZ_CONFIG.replace(mode="decoupled", bus_bytes=w, sp_banks=max(8, 2 * w)) for w in (4, 8, 16)}
# Chips whose ST also stores whole words: the bare 4-byte port and a 16-byte AXI4 port (the llm chip's).
WORDS = {"bare4": PACKED[4].replace(st_words=1), "axi16": PACKED[16].replace(st_words=1, axi=1)}


def numpy_dma(program, ext, sp):
    """LD and ST of ``program`` on a byte memory, read from docs/ISA.md with numpy's int8/uint8 views (not
    from ga2_sw.packing): a byte loads as its signed value in a 32-bit word; a word stores its low byte."""
    ext = np.array(ext, dtype=np.uint32).astype(np.uint8)       # an image word is held as its low byte
    sp = np.array(sp, dtype=np.uint32)
    for i in program:
        if i.op == Op.LD:
            sp[i.dst:i.dst + i.len] = ext[i.src:i.src + i.len].view(np.int8).astype(np.int32).view(np.uint32)
        elif i.op == Op.ST and i.wd:        # each word's four bytes, little-endian: numpy's own byte view
            ext[i.dst:i.dst + 4 * i.len] = sp[i.src:i.src + i.len].astype("<u4").view(np.uint8)
        elif i.op == Op.ST:
            ext[i.dst:i.dst + i.len] = (sp[i.src:i.src + i.len] & 0xFF).astype(np.uint8)
    return [int(x) for x in ext], [int(x) for x in sp]


def random_dma_program(rng, config, n=12):
    """LD and ST at any address and length, both memories' ends included, ranges overlapping each other."""
    prog = []
    for _ in range(n):
        length = rng.choice((1, 2, 3, config.bus_bytes - 1, config.bus_bytes, config.bus_bytes + 1,
                             rng.randint(1, 40)))
        ext_addr = rng.choice((0, rng.randint(0, config.ext_words - length), config.ext_words - length))
        sp_addr = rng.choice((0, rng.randint(0, config.sp_words - length), config.sp_words - length))
        if config.st_words and rng.random() < 0.4:      # whole words: an aligned range of 4 bytes a word
            length = min(length, config.ext_words // 4)
            ext_addr = 4 * rng.choice((0, rng.randint(0, config.ext_words // 4 - length), config.ext_words // 4 - length))
            prog.append(st(sp_addr, ext_addr, length, wd=1))
            continue
        prog.append(ld(sp_addr, ext_addr, length) if rng.random() < 0.5 else st(sp_addr, ext_addr, length))
    return prog + [halt()]


def test_config_rules():
    assert Config().bus_bytes == 1                       # the chapter's port stays the default
    with pytest.raises(ValueError, match="must be 1 in inorder mode"):
        Config(bus_bytes=4)
    with pytest.raises(ValueError, match=r"less than sp_banks \(8\)"):
        Config(mode="decoupled", bus_bytes=8)
    with pytest.raises(ValueError, match="one of 1, 4, 8, 16"):
        Config(mode="decoupled", bus_bytes=2)
    with pytest.raises(ValueError, match="multiple of bus_bytes"):
        Config(mode="decoupled", bus_bytes=4, ext_words=66)


@pytest.mark.parametrize("w", [4, 8, 16])
def test_beats_count_the_groups_a_range_touches(w):
    config = PACKED[w]
    for x in range(3 * w):
        for n in range(1, 3 * w):
            assert beats(x, n, config) == len({a // w for a in range(x, x + n)})
    assert beats(5, 7, Config()) == 7                   # a word per beat on the chapter's port


@pytest.mark.parametrize("w", [4, 8, 16])
def test_machine_against_numpy(w):
    config, rng = PACKED[w], random.Random(w)
    for _ in range(40):
        program = random_dma_program(rng, config)
        ext = [rng.randrange(1 << 32) for _ in range(config.ext_words)]
        sp = [rng.randrange(1 << 32) for _ in range(config.sp_words)]
        r = run(program, config, ext, sp)
        assert r.ok
        assert (r.ext, r.sp) == numpy_dma(program, ext, sp), format_program(program)
        busy = sum(beats(i.src if i.op == Op.LD else i.dst, i.len, config) for i in program[:-1])
        assert r.counters.dma == busy + sum(config.ext_latency if i.op == Op.LD else 2 for i in program[:-1])


@pytest.mark.parametrize("name", list(WORDS))
def test_whole_word_stores_against_numpy(name):
    config, rng = WORDS[name], random.Random(len(name))
    wide = 0
    for _ in range(40):
        program = random_dma_program(rng, config)
        wide += sum(i.op == Op.ST and i.wd for i in program)
        ext = [rng.randrange(1 << 32) for _ in range(config.ext_words)]
        sp = [rng.randrange(1 << 32) for _ in range(config.sp_words)]
        r = run(program, config, ext, sp)
        assert r.ok and (r.ext, r.sp) == numpy_dma(program, ext, sp), format_program(program)
        # an ST of whole words moves the beats of its 4 len bytes (counted by hand: the groups they touch)
        w = config.bus_bytes
        moved = [len({a // w for a in range(i.dst, i.dst + 4 * i.len)}) for i in program if i.op == Op.ST and i.wd]
        assert [cycle_counts([i, halt()], config)[0].dma for i in program if i.op == Op.ST and i.wd] == \
            [n + (3 if config.axi else 2) for n in moved]
    assert wide > 100


def test_whole_word_stores_are_checked():
    """wd is a stray bit where the chip has no st_words (ILLEGAL), needs an aligned address (SHAPE) and its
    4 len bytes inside external memory (EXT_RANGE), on the machine and the chip alike."""
    from ga2_sw.isa import Err, check, encode
    config = WORDS["bare4"]
    last = config.ext_words - 4
    cases = [(st(0, 8, 4, wd=1), PACKED[4], Err.ILLEGAL), (st(0, 6, 4, wd=1), config, Err.SHAPE),
             (st(0, last, 1, wd=1), config, Err.NONE), (st(0, last, 2, wd=1), config, Err.EXT_RANGE),
             (st(0, last - 4, 2, wd=1), config, Err.NONE)]
    for instr, cfg, err in cases:
        assert check(instr, cfg) == err, instr
        assert run([instr, halt()], cfg).error == (err if err != Err.NONE else Err.NONE)
    for backend in ("verilator", "pysim"):
        if not get_backend(backend).available():
            continue
        for instr, cfg, err in cases[:2] + cases[3:4]:
            got = get_backend(backend).run(cfg, [encode(instr), encode(halt())])
            assert got.error == err, (backend, instr)


def _differential(backend, config, jobs):
    results = get_backend(backend).run_many(config, jobs)
    for (program, ext, sp), got in zip(jobs, results):
        ref = run(program, config, ext, sp)
        diffs = compare_results(ref, got)
        assert not diffs, f"{backend} differs on\n{format_program(program)}\n" + "\n".join(diffs)
        assert cycle_counts(program, config) == (ref.counters, ref.error, ref.pc)


def _jobs(config, n, seed):
    rng = random.Random(seed)
    return [(random_dma_program(rng, config), [rng.randrange(1 << 32) for _ in range(config.ext_words)],
             [rng.randrange(1 << 32) for _ in range(config.sp_words)]) for _ in range(n)]


@pytest.mark.parametrize("w", [4, 8, 16])
def test_verilator_and_icarus_equal_the_machine(w):
    """Partial first and last beats, one-beat ranges, both memories' ends, at every port width (16 bytes is a
    128-bit port: Verilator's wide type in the harness)."""
    config = PACKED[w]
    for backend in ("verilator", "icarus"):
        if not get_backend(backend).available():
            continue
        _differential(backend, config, _jobs(config, 30, seed=100 + w))


def test_pysim_equals_the_machine():
    _differential("pysim", PACKED[4], _jobs(PACKED[4], 2, seed=7))


# the AXI4 port's whole words run in the default tier through the llm chip's products (tests/test_llm_ga2.py)
@pytest.mark.parametrize("name", ["bare4", pytest.param("axi16", marks=pytest.mark.slow)])
def test_whole_word_stores_on_every_simulator(name):
    """STs of whole words among byte LDs and STs: pysim on two programs, Verilator and Icarus (whose testbench
    has no AXI4 subordinate) on thirty."""
    config = WORDS[name]
    _differential("pysim", config, _jobs(config, 2, seed=11))
    for backend in ("verilator",) + (() if config.axi else ("icarus",)):
        if get_backend(backend).available():
            _differential(backend, config, _jobs(config, 30, seed=12))


@pytest.mark.slow       # default tier: random programs on the packed port below, the axi chip's steps (test_chips)
@pytest.mark.skipif(not get_backend("verilator").available(), reason="Verilator not installed")
def test_decode_steps_through_a_packed_port():
    """The chapter's five decode steps on a 4-byte port: Verilator equals the model (memories and counters), and
    batch invariance holds with every sequence's output the plain-Python integer reference's."""
    from ga2_sw.check import check_batching
    from sim.decode_table import decode_table
    config = Config(mode="decoupled", bus_bytes=4, sp_banks=16)
    rows, _ = decode_table(config, "verilator")
    assert all(r["matches_reference"] for r in rows)
    for r in rows:
        assert r["bytes"] == r["words"] and r["beats"] < r["words"] / 3
    assert check_batching(config, seeds=(1,)) == []


def test_bus_width_command(tmp_path, capsys):
    """`ga2 bus-width`: the steps at each width, checked against the model, the bound named; a width the chip
    cannot have is refused in one line with status 2."""
    import json
    from ga2_cli import main
    out = tmp_path / "bus.json"
    assert main(["bus-width", "--widths", "1,4", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["config"]["sp_banks"] == 8           # the chip's banks: enough for 4
    rows = json.loads(out.read_text())["rows"]
    assert [r["bus_bytes"] for r in rows] == [1] * 5 + [4] * 5 and all(r["matches_reference"] for r in rows)
    step = {r["bus_bytes"]: r for r in rows if r["name"].startswith("B=4 (")}
    assert step[1]["beats"] == step[1]["words"] == 4 * step[4]["beats"]         # a quarter of the beats
    assert step[4]["cycles"] < step[1]["cycles"]
    text = capsys.readouterr().out
    assert "4 bytes/beat: the B = 4 step" in text and "bound by the matrix lane" in text
    assert main(["bus-width", "--widths", "2"]) == 2
    assert "--widths: each must be one of 1, 4, 8, 16, not 2" in capsys.readouterr().err
    assert main(["bus-width", "--widths", "16", "--sp-banks", "16"]) == 2
    capsys.readouterr()
    assert main(["bus-width", "--widths", "16", "--json", str(out)]) == 0     # more banks than the chip's
    assert json.loads(out.read_text())["config"]["sp_banks"] == 32
    assert "32 banks (the chip's 8 are too few for 16 bytes a beat)" in capsys.readouterr().out
