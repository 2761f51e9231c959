"""sim.online_whatif: the online unit at two scratchpad accesses a cycle, worked by hand on single instructions; the
cycle model restored after the patch; the step's products untouched by it; the command's refusals."""

import subprocess
import sys

import pytest

from ga2_sw import cycles as model, isa
from ga2_sw.chips import config_of
from ga2_sw.cycles import busy_cycles, cycle_counts
from ga2_sw.timing import nrm_busy, rsa_busy
from sim.online_whatif import patched, rows

LLM = config_of("llm")
N = 64
RSA = isa.rsa(dst=3000, src=1000, len=N, ld=N, a=5000)
NRM = isa.nrm(dst=3000, src=1000, len=N, m=1, s=0, st=5000)


def test_single_instructions_worked_by_hand():
    """An RSA of n reads 1 + 3n words and writes n: two a cycle, its last read is in cycle 1 + 3n / 2 and its
    writes take n / 2 cycles after its pipeline's depth (the built schedule's gap, rsa_busy - 4n); an NRM reads
    1 + n and writes n likewise (its gap nrm_busy - 2n)."""
    built = busy_cycles(RSA, LLM), busy_cycles(NRM, LLM)
    assert built == (rsa_busy(N, LLM), nrm_busy(N, LLM))
    with patched():
        assert busy_cycles(RSA, LLM) == 1 + 3 * N // 2 + (rsa_busy(N, LLM) - 4 * N) + (N - 1) // 2
        assert busy_cycles(NRM, LLM) == 1 + N // 2 + (nrm_busy(N, LLM) - 2 * N) + (N - 1) // 2
        for instr in (RSA, NRM):
            requests = model.online_requests(instr, LLM)          # the patched schedule
            cycles = [c for c, _, _ in requests]
            assert max(cycles.count(c) for c in cycles) == 2 and requests[-1][0] == busy_cycles(instr, LLM)
            kinds = [k for _, _, k in requests]
            assert kinds == sorted(kinds)                       # every read before every write
        assert cycle_counts([RSA, isa.halt()], LLM)[0].vec == busy_cycles(RSA, LLM)
    assert (busy_cycles(RSA, LLM), busy_cycles(NRM, LLM)) == built


def test_the_model_is_restored_after_an_error():
    before = cycle_counts([RSA, isa.halt()], LLM)[0]
    with pytest.raises(RuntimeError):
        with patched():
            raise RuntimeError
    assert cycle_counts([RSA, isa.halt()], LLM)[0] == before and model.online_requests(RSA, LLM)[-1][0] == before.vec
    with pytest.raises(ValueError, match="1 or 2"):
        with patched(3):
            pass


def test_only_the_attention_gets_faster():
    """B = 1 at 64 tokens: the products' programs have no online instruction, so only the attention's cycles
    change, and they fall."""
    (built, faster), = rows([1], [64])
    for name, phase in built["phases"].items():
        if name == "attention":
            assert faster["phases"][name]["chip"] < phase["chip"]
        else:
            assert faster["phases"][name] == phase, name
    assert faster["cycles"] < built["cycles"] and faster["fraction_of_bound"] > built["fraction_of_bound"]


@pytest.mark.parametrize("argv,words", [(["--batches", "9"], "--batches"), (["--contexts", "2048"], "--contexts"),
                                        (["--chip", "llm"], "--chip")])
def test_the_command_refuses_bad_input_in_one_line(argv, words):
    r = subprocess.run([sys.executable, "-m", "sim.online_whatif", *argv], capture_output=True, text=True)
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
