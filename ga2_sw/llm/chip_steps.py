"""SmolLM2's attention steps as chip programs: sampled steps of the GA-2 path, run on a simulator of the
chip with the online unit and held to the path's own int8 outputs.

The GA-2 path computes each block's attention with ``vector_numerics`` (numpy over all heads);
here the same step (its int8 queries, the key/value heads' int8 caches, each head's score and output
scalings) becomes one program of ``ga2_sw.online_program.grouped_program``: each key/value head's caches stream
through the scratchpad once for the three query heads that share them (grouped-query attention on the chip),
and the steps of two sequences may share one program (a batch, at their own lengths). The simulator's memory
and counters must equal the reference machine's and the cycle model's, and its outputs the path's (both int8
readings of each output, the coarse and the fine NRM's, ``ga2_path.read_outputs``). Running them on a simulator
is ``sim.llm_attention``'s."""

from dataclasses import dataclass

import numpy as np

from ..config import Config
from ..online_program import Group, grouped_ext_image, grouped_layout, grouped_program

__all__ = ["Step", "capture", "programs", "STEP_CONFIG", "PROMPTS", "BLOCKS"]

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
        lay = grouped_layout(config, groups, config.d, min(64, config.sm_max_len), key_digits.pop())
        out.append((grouped_program(lay), grouped_ext_image(lay, data), lay, part))
    return out
