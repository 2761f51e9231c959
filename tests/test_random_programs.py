"""The random-program generator (sim.random_programs) on every chip ``Config`` accepts, not only the fuzz chip.

``ga2 fuzz`` and the differential tests trust the generator to write programs that are valid up to the one
faulting instruction it means to write, on the chip it is given. The fuzz chip (4 x 4, 512 words) is the easy
case; the arithmetic of addresses, lengths and shapes is tested here where it is tight: scratchpads of 64
words (and cramped programs, which crowd any chip's instructions into 64 words), arrays of up to 32 x 32
cells whose C operand outgrows the scratchpad, a scratchpad of 2^16 words that every 16-bit address lies
inside, and any bank count, in both modes. The programs run on the reference machine (fast, no RTL), which
must end them with the error they were written for; the cycle model must agree with it, as ``ga2 fuzz``
checks."""

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.isa import Err, check, decode, encode
from ga2_sw.machine import Machine
from sim.random_programs import (FAULT_ERRORS, FAULT_KINDS, FUZZ_CONFIG, fuzz_job, random_fault, random_program,
                                 random_valid_instr, random_words)

SETTINGS = dict(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Above this many external words the programs are checked by the cycle model alone (the reference machine
# would build an image of every word).
MODEL_EXT_WORDS = 1 << 20


def words(program):
    """The program as the chip holds it: every Instr encoded (which checks each field's range), raw words kept."""
    return [w if isinstance(w, int) else encode(w) for w in program]


def run_on_the_model(config, program, ext=(), sp=()):
    """Run ``program`` on the reference machine (or, on a huge external memory, the cycle model alone) and
    return its error; the cycle model must agree with the machine, as in ``ga2 fuzz``."""
    program = words(program)
    model = cycle_counts(program, config)
    if config.ext_words > MODEL_EXT_WORDS:
        return model[1]
    ref = Machine(config).run(program, list(ext), list(sp))
    assert model == (ref.counters, ref.error, ref.pc), "the cycle model differs from the reference machine"
    return ref.error


def run_fuzz_cases(config, cases):
    """Fuzz cases ``cases`` of ``ga2 fuzz --seed 0`` on ``config`` (case i is ``fuzz_job(config, i)``), on the
    model; returns the programs."""
    programs = []
    for seed in cases:
        program, ext, sp = fuzz_job(config, seed)
        run_on_the_model(config, program, ext, sp)
        programs.append(program)
    return programs


def check_fault_kinds(config, seeds):
    """Programs ending in each fault kind (and valid ones) end with the error they were written for."""
    for seed in seeds:
        for kind in (None,) + FAULT_KINDS:
            rng = random.Random(f"{kind}-{seed}")
            program = random_program(rng.randint, config, kind, cramped=rng.random() < 0.5)
            want = Err.NONE if kind is None else FAULT_ERRORS[kind]
            assert run_on_the_model(config, program) == want, (kind, seed)


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
@pytest.mark.parametrize("banks", [4, 8, 64])
def test_a_64_word_scratchpad(mode, banks):
    """``ga2 fuzz --sp-words 64`` (cases 150..199 of seed 0), and OVERLAP faults on its chip: the faulting RQ's
    source and destination, up to len - 1 words apart, take 2 len - 1 words, so len is held to half the
    scratchpad."""
    config = FUZZ_CONFIG.replace(sp_words=64, sp_banks=banks, mode=mode)
    run_fuzz_cases(config, range(150, 200))
    for seed in range(40):
        rng = random.Random(seed)
        bad, err = random_fault(rng.randint, config, "overlap")
        assert err == Err.OVERLAP and check(bad, config) == Err.OVERLAP
        program = random_program(rng.randint, config, "overlap")
        assert run_on_the_model(config, program) == Err.OVERLAP


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
def test_a_32x32_array(mode):
    """``ga2 fuzz --rows 32 --cols 32``: an MM's C operand of up to 32 x 32 words outgrows the 512-word
    scratchpad, so the shape is cut to fit where packed strides are the fallback."""
    config = FUZZ_CONFIG.replace(rows=32, cols=32, mode=mode)
    programs = run_fuzz_cases(config, range(30))
    mms = [i for p in programs for i in p if not isinstance(i, int) and i.op.name == "MM"]
    assert max(i.M * i.N for i in mms) > 256              # the shapes still reach far into the array
    check_fault_kinds(config, range(2))


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
def test_a_16x16_array(mode):
    """``ga2 fuzz --rows 16 --cols 16``: cramped programs draw instructions for a 64-word scratchpad, smaller
    than an MM's C operand of up to 16 x 16 words."""
    config = FUZZ_CONFIG.replace(rows=16, cols=16, mode=mode)
    run_fuzz_cases(config, range(20, 50))
    cramped = config.replace(sp_words=64, ext_words=64)
    for seed in range(100):
        ins = random_valid_instr(random.Random(seed).randint, cramped)
        assert check(decode(encode(ins))[0], cramped) == Err.NONE, ins


# -- every chip Config accepts ---------------------------------------------------------------------------------

@st.composite
def configs(draw):
    """A Config: every combination the constructor accepts is reachable, with the sizes where the generator's
    arithmetic is tight (64 words, 2^16 words, a C operand larger than the scratchpad) drawn often."""
    mode = draw(st.sampled_from(["inorder", "decoupled"]))
    banks = draw(st.sampled_from([4, 8, 16, 32, 64]))
    sp = draw(st.one_of(st.sampled_from([64, 65, 100, 128, 320, 512, 1024, 65535, 65536]), st.integers(64, 65536)))
    ext = draw(st.one_of(st.sampled_from([64, 100, 512, 4096, 65536, 65537, 1 << 26]), st.integers(64, 1 << 26)))
    sm_max_len = draw(st.one_of(st.sampled_from([1, 2, 64, 1024]), st.integers(1, 1024)))
    kw = dict(mode=mode, rows=draw(st.integers(1, 32)), cols=draw(st.integers(1, 32)),
              imem_words=draw(st.sampled_from([2, 3, 4, 24, 64, 300])), sm_max_len=sm_max_len,
              max_ctx=min(sm_max_len, 16), online_unit=draw(st.integers(0, 1)), sp_banks=banks,
              ext_latency=draw(st.integers(1, 64)))
    if mode == "decoupled":
        sp -= sp % banks
        bus_bytes = draw(st.sampled_from([b for b in (1, 4, 8, 16) if b < banks]))
        ext -= ext % bus_bytes
        axi = draw(st.integers(0, 1))
        rq_overlap = draw(st.integers(0, 1))
        kw.update(bus_bytes=bus_bytes, axi=axi, row_b=draw(st.integers(0, 1)), rq_overlap=rq_overlap,
                  sm_lanes=draw(st.integers(1, 2)),
                  memory=draw(st.sampled_from(["ideal", "ddr3-1600"])) if axi else "ideal",
                  row_writes=draw(st.integers(0, 1)) if kw["cols"] < banks else 0,
                  rq_lanes=draw(st.sampled_from([n for n in (1, 2, 4, 8, 16) if 4 * n <= banks]))
                  if rq_overlap else 1,
                  ld_overlap=draw(st.integers(0, 1)) if bus_bytes > 1 and not axi else 0)
    return Config(sp_words=sp, ext_words=ext, **kw)


def check_instructions(config, draw, count):
    """Random valid instructions encode and pass ``isa.check``; each fault kind's instruction (FAULT_KINDS but
    fall_off and pc_overflow, which are program shapes) encodes and faults with the error it was written for."""
    for _ in range(count):
        ins = random_valid_instr(draw, config)
        assert check(decode(encode(ins))[0], config) == Err.NONE, ins
        for kind in FAULT_KINDS[:-2]:
            bad, want = random_fault(draw, config, kind)
            got, err = decode(bad if isinstance(bad, int) else encode(bad))
            assert (err if err != Err.NONE else check(got, config)) == want, (kind, bad)


def check_programs(config, seed):
    """Programs of each kind (valid ones included), from ``random.Random(seed)`` as ``ga2 fuzz`` draws them,
    encode and end on the model with the error they were written for."""
    rng = random.Random(seed)
    for kind in (None, None) + FAULT_KINDS:
        program = random_program(rng.randint, config, kind, cramped=rng.random() < 0.5)
        ext = random_words(rng, rng.choice((0, 16, min(config.ext_words, 4096))))
        sp = random_words(rng, rng.choice((0, 64, min(config.sp_words, 4096))))
        want = Err.NONE if kind is None else FAULT_ERRORS[kind]
        assert run_on_the_model(config, program, ext, sp) == want, kind


def check_config(config, data, seed):
    """Instructions from Hypothesis's draws (which favour the ends of each range, where the arithmetic is
    tight, and shrink), then programs from a seeded ``random.Random``."""
    check_instructions(config, lambda lo, hi: data.draw(st.integers(lo, hi)), 5)
    check_programs(config, seed)


@settings(max_examples=100, **SETTINGS)
@given(configs(), st.data(), st.integers(0, 2**32 - 1))
def test_random_configs(config, data, seed):
    """Any chip, either mode: the generator's bounds hold wherever Config lets the memories and the array go."""
    check_config(config, data, seed)


@pytest.mark.slow
@settings(max_examples=2000, **SETTINGS)
@given(configs(), st.data(), st.integers(0, 2**32 - 1))
def test_random_configs_long(config, data, seed):
    """test_random_configs on twenty times as many chips (about two minutes)."""
    check_config(config, data, seed)


@pytest.mark.parametrize("mode", ["inorder", "decoupled"])
def test_the_largest_memories(mode):
    """The data memories at their largest, the array too (a program memory of 64 words: PC overflow at 2^16
    costs seconds). At 2^16 scratchpad words no 16-bit address lies past the end, so a range fault needs a
    range that starts inside and runs past it."""
    config = Config(rows=32, cols=32, mode=mode).with_largest_memories().replace(imem_words=64)
    check_instructions(config, random.Random(1).randint, 200)
    check_programs(config, 1)


def scripted(values):
    """A ``draw`` that returns ``values`` in turn, each checked to lie in the range asked for."""
    values = iter(values)

    def draw(lo, hi):
        value = next(values)
        assert lo <= value <= hi, (lo, value, hi)
        return value
    return draw


def test_an_sp_range_rq_past_the_end_is_apart_from_its_source():
    """An SP_RANGE fault's RQ whose destination starts just before the end, within len words of its source:
    moved apart, or OVERLAP (which the checker ranks first) would be its error."""
    config = FUZZ_CONFIG
    #                variant  len  src  dst  RQ  not swapped
    draw = scripted([2,       16,  496, 500, 1,  0])
    ins, err = random_fault(draw, config, "sp_range")
    assert (ins.op.name, ins.dst, ins.len, err) == ("RQ", 500, 16, Err.SP_RANGE)
    assert check(ins, config) == Err.SP_RANGE
