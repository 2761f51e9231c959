"""SmolLM2's attention steps as chip programs: sampled steps of the GA-2 path, run on a simulator of the
chip with the online unit and held to the path's own int8 outputs.

The GA-2 path computes each block's attention with ``vector_numerics`` (numpy over all heads);
here the same step (its int8 queries, the key/value heads' int8 caches, each head's score and output
scalings) becomes one program of ``ga2_sw.online_program.grouped_program``: each key/value head's caches stream
through the scratchpad once for the three query heads that share them (grouped-query attention on the chip),
and the steps of two sequences may share one program (a batch, at their own lengths). The simulator's memory
and counters must equal the reference machine's and the cycle model's, and its outputs the path's (both int8
readings of each output, the coarse and the fine NRM's, ``ga2_path.read_outputs``)."""

from dataclasses import dataclass

import numpy as np

from ..config import Config
from ..online_program import Group, GroupedLayout, grouped_ext_image, grouped_outputs, grouped_program

__all__ = ["Step", "capture", "programs", "run_steps", "ChipAttention", "ChipMismatch", "STEP_CONFIG", "PROMPTS",
           "BLOCKS"]

# The chip the steps run on: 4 x 4, decoupled, the online unit, 8 banks (a chunk's keys 65 words apart,
# ``GroupedLayout.key_stride``).
STEP_CONFIG = Config(online_unit=1, mode="decoupled", sp_banks=8, sp_words=32768, ext_words=131072,
                     imem_words=4096, d=64)
PROMPTS = ("The capital of France is", "A systolic array multiplies matrices by")
BLOCKS = (0, 7, 17, 29)         # the blocks whose steps are sampled: first, early, late, last


@dataclass
class Step:
    """One block's attention for one token of one sequence, as the GA-2 path computed it."""
    prompt: int
    block: int
    pos: int
    q8: np.ndarray          # (heads, d)
    K8: np.ndarray          # (kv_heads, tokens, d)
    V8: np.ndarray
    score: list             # per query head: (m, s)
    norm: list
    out8: np.ndarray        # (heads, d): the path's outputs (the coarse reading)
    group: int              # query heads per key/value head
    fine: list = None       # per query head: (m, s) of the fine reading's NRM ([] or None: no fine reading)
    fine8: np.ndarray = None    # (heads, d): the path's fine readings
    key_digits: int = 1     # 2: K8 holds wide keys (15 bits), two digit planes on the chip

    @property
    def length(self):
        return self.K8.shape[1]


def capture(model, count, tokens=80, prompts=PROMPTS, blocks=BLOCKS):
    """``count`` steps of the GA-2 path (``model``, a ``Ga2Model``): greedy generation of ``tokens`` tokens from
    each of ``prompts``, the steps of ``blocks`` taken at positions spread over the generation (contexts on both
    sides of a 64-token chunk), the prompts' steps interleaved (so a program's batch holds both sequences)."""
    per_prompt = -(-count // len(prompts))
    by_prompt = []
    for p, prompt in enumerate(prompts):
        n_prompt = len(model.model.encode(prompt))
        wanted = sorted({(blocks[k % len(blocks)], n_prompt - 1 + (k * 37 + 11 * p) % tokens)
                         for k in range(per_prompt)})
        taken = []

        def hook(b, pos, q8, K8, V8, score, norm, out8, fine, fine8):
            if (b, pos) in wanted:
                taken.append(Step(p, b, pos, q8.copy(), K8.copy(), V8.copy(), list(score), list(norm), out8.copy(),
                                  model.group, list(fine), None if fine8 is None else fine8.copy(),
                                  model.key_digits))
        model.on_attention = hook
        try:
            model.generate(prompt, max_tokens=tokens, stop=set())
        finally:
            model.on_attention = None
        by_prompt.append(taken[:per_prompt])
    steps = [s for group in zip(*by_prompt) for s in group]
    return steps[:count]


def programs(steps, batch=2, config=STEP_CONFIG):
    """Chip programs for ``steps``: ``batch`` steps (of different sequences where possible) per program, each
    step's key/value heads a group. ``[(program, ext, layout, steps)]``."""
    out = []
    for k in range(0, len(steps), batch):
        part = steps[k:k + batch]
        groups, data = [], []
        for s in part:
            for kv in range(s.K8.shape[0]):
                heads = range(kv * s.group, (kv + 1) * s.group)
                groups.append(Group(s.length, tuple(s.score[h] for h in heads), tuple(s.norm[h] for h in heads),
                                    tuple(s.fine[h] for h in heads) if s.fine else ()))
                data.append((s.q8[list(heads)], s.K8[kv], s.V8[kv]))
        key_digits = {s.key_digits for s in part}
        if len(key_digits) != 1:
            raise ValueError("a program's steps hold their keys alike (key_digits)")
        lay = GroupedLayout(config, tuple(groups), config.d, min(64, config.sm_max_len), key_digits.pop())
        out.append((grouped_program(lay), grouped_ext_image(lay, data), lay, part))
    return out


def run_steps(steps, sim="verilator", batch=2, config=STEP_CONFIG):
    """Run the steps' programs on ``sim``; one row per program: ``{"steps": [(prompt, block, pos, length)],
    "cycles", "matches_model", "matches_path"}``."""
    from sim.backends import get_backend
    from sim.compare import compare_results
    from ..cycles import cycle_counts
    from ..machine import Machine
    jobs = programs(steps, batch, config)
    results = get_backend(sim).run_many(config, [(prog, ext) for prog, ext, _, _ in jobs])
    rows = []
    for (prog, ext, lay, part), got in zip(jobs, results):
        want = Machine(config).run(prog, ext)
        model = cycle_counts(prog, config)[0]
        outs = grouped_outputs(lay, got.ext) + grouped_outputs(lay, got.ext, fine=True)
        expected = ([list(map(int, s.out8[h])) for s in part for h in range(s.q8.shape[0])] +
                    [list(map(int, s.fine8[h])) for s in part if s.fine for h in range(s.q8.shape[0])])
        flat = [o for group in outs for o in group]
        rows.append({"steps": [(s.prompt, s.block, s.pos, s.length) for s in part],
                     "heads": sum(s.q8.shape[0] for s in part),
                     "cycles": got.counters.cycles, "instructions": len(prog),
                     "matches_model": not compare_results(want, got) and got.counters == model,
                     "matches_path": flat == expected})
    return rows


class ChipMismatch(Exception):
    """A simulator's attention step differed from the GA-2 path's numerics or from the cycle model."""


class ChipAttention:
    """Every attention step of a generation run as a chip program on a simulator, its outputs the ones the model
    continues with (``Ga2Model.chip``; ``ga2 llm generate --sim``): one program a step (the step's key/value
    heads as groups, ``programs`` with a batch of one), run on ``sim``; the simulator's int8 outputs, both
    readings, must equal the path's numpy ones and its counters the cycle model's, else ``ChipMismatch``.
    ``steps`` and ``cycles`` count what ran."""

    def __init__(self, sim, config=STEP_CONFIG):
        from sim.backends import get_backend
        self.sim, self.config, self.backend = sim, config, get_backend(sim)
        self.steps = self.cycles = 0

    def __call__(self, step):
        """Run ``step`` (a ``Step`` with the path's outputs); return the simulator's (out8, fine8), (heads, d)."""
        from ..cycles import cycle_counts
        [(prog, ext, lay, _)] = programs([step], 1, self.config)
        got = self.backend.run(self.config, prog, ext)
        heads = step.q8.shape[0]
        out8 = np.array([row for group in grouped_outputs(lay, got.ext) for row in group]).reshape(heads, -1)
        fine8 = None
        if step.fine:
            fine8 = np.array([row for g in grouped_outputs(lay, got.ext, fine=True) for row in g]).reshape(heads, -1)
        where = f"block {step.block}, position {step.pos}"
        if not np.array_equal(out8, step.out8) or (fine8 is not None and not np.array_equal(fine8, step.fine8)):
            raise ChipMismatch(f"{self.sim}: the attention outputs of {where} differ from the GA-2 path's")
        predicted = cycle_counts(prog, self.config)[0]
        if got.counters != predicted:
            raise ChipMismatch(f"{self.sim}: the counters of {where} differ from the cycle model's "
                               f"({got.counters} against {predicted})")
        self.steps += 1
        self.cycles += got.counters.cycles
        return out8, fine8
