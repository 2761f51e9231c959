"""SmolLM2's attention steps (``ga2_sw.llm.chip_steps``) on a simulator: ``run_steps`` runs sampled steps (``ga2 llm
steps``), each program's memory and counters held to the reference machine's and the cycle model's, and its
outputs to the GA-2 path's. (``sim.llm_step`` runs every step of a generation.)"""

from ga2_sw.cycles import cycle_counts
from ga2_sw.llm.chip_steps import STEP_CONFIG, programs
from ga2_sw.machine import Machine
from ga2_sw.online_program import grouped_outputs

from .backends import get_backend
from .compare import compare_results

__all__ = ["run_steps", "ChipMismatch"]


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
    """A simulator's program of a step differed from the GA-2 path's numerics or from the cycle model."""
