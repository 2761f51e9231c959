"""What the what-ifs on SmolLM2's decode step share (``sim.online_whatif``, ``sim.sums_whatif``): the step's rows
of ``ga2 llm throughput`` on the llm chip as built and under a patch of the cycle model or the builders, and
their command line."""

from ga2_sw.chips import config_of
from ga2_sw.llm import whole_step
from ga2_sw.llm.ga2_path import HEAD_CANDIDATES, PATH_KEY_DIGITS
from ga2_sw.options import IntList, Parser

__all__ = ["compare", "parser"]

BATCHES = IntList(1, 8)
CONTEXTS = IntList(1, 1024)


def compare(patch, batches, contexts, config=None):
    """``ga2 llm throughput``'s rows (its default numerics) on ``config`` (the llm chip) as built and inside
    ``patch`` (a context manager): ``[(as built, patched)]``."""
    config = config or config_of("llm")
    numerics = {"key_digits": PATH_KEY_DIGITS, "head_candidates": HEAD_CANDIDATES}
    built = whole_step.throughput_rows(config, batches, contexts, **numerics)
    with patch:
        faster = whole_step.throughput_rows(config, batches, contexts, **numerics)
    return list(zip(built, faster))


def parser(prog, doc):
    """A what-if's command line: ``--batches`` and ``--contexts``, as ``ga2 llm throughput`` takes them."""
    p = Parser(prog=prog, description=doc.split("\n\n")[0])
    p.add_argument("--batches", metavar="B,B", type=BATCHES, default=[1, 2, 4, 8],
                   help="sequences a step, each 1..8 (default 1,2,4,8)")
    p.add_argument("--contexts", metavar="L,L", type=CONTEXTS, default=[64, 1024],
                   help="tokens of context, each 1..1024 (default 64,1024)")
    return p
