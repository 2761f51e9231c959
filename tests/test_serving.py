"""Continuous batching (``ga2_sw.llm.serving``): the schedule against a plain greedy loop per request
on a stand-in model (no model file needed), the steps' cycles against the cycle model of the chip's programs,
and the prompts file's errors. The real model's served tokens are checked in tests/test_llm_ga2.py."""

import numpy as np
import pytest

from ga2_sw.cycles import cycle_counts
from ga2_sw.llm.serving import Request, load_prompts, serve
from ga2_sw.llm.step_cycles import SMOLLM2, StepCycles, block_cycles, block_programs

VOCAB, STOP = 9, 0          # a small vocabulary, so that the stop token comes often


class Toy:
    """A deterministic stand-in for a model: the next token is a hash of the sequence so far (so a request
    that ran the wrong token or position, or another request's cache, goes elsewhere), 0 ends a request."""

    def new_cache(self):
        return []

    def step(self, token, pos, cache):
        assert pos == len(cache), "positions must run 0, 1, 2, ... in each sequence"
        cache.append(token)
        logits = np.zeros(VOCAB)
        logits[(sum((i + 3) * t for i, t in enumerate(cache)) * 7 + len(cache) ** 2) % VOCAB] = 1
        return logits

    def step_batch(self, items):
        return [self.step(*item) for item in items]


def greedy(prompt, max_tokens):
    """The plain loop: the prompt, then each token generated, one at a time."""
    toy, cache = Toy(), []
    for pos, t in enumerate(prompt):
        logits = toy.step(t, pos, cache)
    out = []
    while len(out) < max_tokens:
        nxt = int(np.argmax(logits))
        if nxt == STOP:
            break
        out.append(nxt)
        logits = toy.step(nxt, len(cache), cache)
    return out


@pytest.mark.parametrize("max_batch, gap", [(1, 0), (2, 0), (3, 2), (4, 5), (8, 0)])
def test_served_tokens_are_each_requests_own(max_batch, gap):
    rng = np.random.default_rng(max_batch * 10 + gap)
    requests = [Request(n, "", [int(t) for t in rng.integers(1, VOCAB, rng.integers(1, 9))], int(rng.integers(1, 12)),
                        n * gap) for n in range(7)]
    steps = serve(Toy(), requests, max_batch, {STOP})
    for r in requests:
        assert r.generated == greedy(r.tokens, r.max_tokens), r.id
    assert any(len(r.generated) < r.max_tokens for r in requests)          # the stop token ended some
    # the schedule: never more than max_batch, arrivals respected, in order, a request in every step between
    # its join and its leave, one token of its sequence a step
    for s in steps:
        assert 1 <= len(s["requests"]) <= max_batch
    for r in requests:
        mine = [s for s in steps if r.id in s["requests"]]
        assert mine[0]["step"] == r.joined >= r.arrival and mine[-1]["step"] == r.left - 1
        assert [s["step"] for s in mine] == list(range(r.joined, r.left))
        assert [s["contexts"][s["requests"].index(r.id)] for s in mine] == list(range(1, len(mine) + 1))
        assert len(mine) == len(r.tokens) + len(r.generated) - (len(r.generated) == r.max_tokens)
    joins = sorted(requests, key=lambda r: r.joined)
    assert [r.id for r in joins] == sorted(r.id for r in requests)        # first come, first served
    # every free slot is taken at once by someone who has arrived and waits
    carried = 0
    for s in steps:
        waiting = [r for r in requests if r.arrival <= s["step"] and r.joined >= s["step"]]
        assert len(s["joined"]) == min(max_batch - carried, len(waiting))
        carried = len(s["requests"]) - len(s["left"])


def test_ragged_step_cycles_are_the_programs_cycle_model():
    cycles = StepCycles(4)
    step = cycles.step([5, 17, 1])
    config, proj, attn = block_programs(4, [5, 17, 1])
    blocks = SMOLLM2["blocks"]
    assert step["projection"] == blocks * cycle_counts(proj, config)[0].cycles
    assert step["attention"] == blocks * cycle_counts(attn, config)[0].cycles
    assert step["cycles"] == step["projection"] + step["attention"]
    # the lengths in place of a uniform context: between the shortest's and the longest's uniform steps
    low, high = block_cycles(4, 3, 1), block_cycles(4, 3, 17)
    assert blocks * low["attention"] < step["attention"] < blocks * high["attention"]
    assert cycles.step([16, 16])["cycles"] == blocks * block_cycles(4, 2, 16)["cycles"]
    # the words: weights once a step, each sequence's caches (2 x context x d per key/value head)
    assert step["weights"] == blocks * (9 + 2 * 3) * 64 * 576
    assert step["kv"] == blocks * 3 * 2 * 64 * (5 + 17 + 1)
    assert step["words"] > step["weights"] + step["kv"]
    with pytest.raises(ValueError, match="1..4 sequences"):
        cycles.step([1] * 5)


def test_prompts_file_errors_name_the_line(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("# prompts\n\nThe capital of France is\n  \nWater boils at\n")
    assert load_prompts(f) == ["The capital of France is", "Water boils at"]
    f.write_text("one\n" + "x" * 4001 + "\n")
    with pytest.raises(ValueError, match=r"p.txt, line 2: a prompt of 4,001 characters; at most 4,000"):
        load_prompts(f)
    f.write_text("# nothing\n\n")
    with pytest.raises(ValueError, match="no prompt"):
        load_prompts(f)
    f.write_text("a\n" * 65)
    with pytest.raises(ValueError, match="line 65: more than 64 prompts"):
        load_prompts(f)


def test_generate_refuses_a_chip_that_cannot_run_the_step(tmp_path, capsys):
    from ga2_cli import main
    assert main(["llm", "generate", "Hello", "--chip", "decoupled"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--chip decoupled" in err[0] and "online unit" in err[0]
    assert main(["llm", "generate", "Hello", "--max-batch", "9"]) == 2
    assert "--max-batch" in capsys.readouterr().err
    assert main(["llm", "generate"]) == 2
    assert "PROMPT" in capsys.readouterr().err


def test_lockstep_meets_once_a_product_for_the_whole_batch():
    """``sim.llm_step.Lockstep`` (``ga2 llm generate --sim``): each sequence in its own thread, every meeting run
    once for the batch with the items in the sequences' order, each thread given its own result; a failure in the
    batch's run reaches every sequence, and a sequence that fails on its own stops the others."""
    from sim.llm_step import Lockstep
    lock, calls = Lockstep(), []

    def run(items):
        calls.append(list(items))
        return [10 * x for x in items]

    def step(base, meetings):
        return [lock.meet(f"product {j}", base + j, run) for j in range(meetings)]
    assert lock.run(step, [(0, 3), (100, 3), (200, 3)]) == [[0, 10, 20], [1000, 1010, 1020], [2000, 2010, 2020]]
    assert calls == [[0, 100, 200], [1, 101, 201], [2, 102, 202]]
    assert lock.run(step, [(7, 2)]) == [[70, 80]]

    def refuse(items):
        raise ValueError("the batch's program differs")
    with pytest.raises(ValueError, match="differs"):
        lock.run(lambda n: lock.meet("x", n, refuse), [(1,), (2,), (3,)])

    def one_fails(n):
        if n == 1:
            raise KeyError("sequence 1")
        return lock.meet("y", n, run)
    with pytest.raises(KeyError, match="sequence 1"):
        lock.run(one_fails, [(0,), (1,), (2,)])
