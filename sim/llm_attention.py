"""SmolLM2's attention steps (``ga2_sw.llm.chip_steps``) on a simulator: ``run_steps`` runs sampled steps (``ga2 llm
steps``), ``ChipAttention`` every step of a generation (``ga2 llm generate --sim``); each program's memory and
counters are held to the reference machine's and the cycle model's, and its outputs to the GA-2 path's."""

import numpy as np

from ga2_sw.cycles import cycle_counts
from ga2_sw.llm.chip_steps import STEP_CONFIG, programs
from ga2_sw.machine import Machine
from ga2_sw.online_program import grouped_outputs

from .backends import get_backend
from .compare import compare_results

__all__ = ["run_steps", "ChipAttention", "ChipMismatch"]


def run_steps(steps, sim="verilator", batch=2, config=STEP_CONFIG):
    """Run the steps' programs on ``sim``; one row per program: ``{"steps": [(prompt, block, pos, length)],
    "cycles", "matches_model", "matches_path"}``."""
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
        self.sim, self.config, self.backend = sim, config, get_backend(sim)
        self.steps = self.cycles = 0

    def __call__(self, step):
        """Run ``step`` (a ``Step`` with the path's outputs); return the simulator's (out8, fine8), (heads, d)."""
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
