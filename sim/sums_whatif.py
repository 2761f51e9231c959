"""What-if on the products' results, on the cycle model: how many cycles SmolLM2's decode step would take on the
``llm`` chip if the chip added each token's two digit rows' int32 sums, ``INPUT_RADIX x high + low``, as its MM
writes them, so that one sum a token left the chip instead of two. The chip is not built that way; the what-if
says what building it would buy, row by row of ``ga2 llm throughput`` (docs/LLM.md, "Next").

The sum is exact in int32 while ``K x 128 x INPUT_LIMIT`` fits it, for a product of ``K`` up to ``K_MAX``: every
product of SmolLM2 but down (K = 1,536), whose two sums still leave the chip. The patch, for the duration of one
run: each such product's result stores (ST ``wd``) carry half the words, and the host reads half the bytes back;
the MMs keep their times (a row pair is added as the second row is written, in the cycle it is written).

Command line: ``python -m sim.sums_whatif [--batches 1,2,4,8] [--contexts 64,1024]``: per batch and context, the
step's cycles, the host's share and the fraction of its bound, as built and with the sums combined."""

import dataclasses
import inspect
import sys
from contextlib import contextmanager

from ga2_sw.analyses.common import table
from ga2_sw.isa import Op
from ga2_sw.llm import whole_step
from ga2_sw.llm.ga2_path import INPUT_LIMIT

from .step_whatif import compare, parser

__all__ = ["K_MAX", "combined", "patched", "rows", "main"]

INT8_MAGNITUDE = 128                # the largest int8 weight's magnitude (-128)
K_MAX = (2 ** 31 - 1) // (INT8_MAGNITUDE * INPUT_LIMIT)


def combined(cols, digits):
    """Whether a product of rows ``cols`` long with inputs of ``digits`` rows a token stores one sum a token."""
    return digits == 2 and cols <= K_MAX


def _arguments(function, *args, **kwargs):
    """The arguments of a call of ``function``, by name, its defaults filled in."""
    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


@contextmanager
def patched():
    """The step's builders with the sums combined (the module docstring), restored on exit."""
    built_program, built_phases = whole_step.linear_program, whole_step.step_phases

    def linear_program(*args, **kwargs):
        program = built_program(*args, **kwargs)
        call = _arguments(built_program, *args, **kwargs)
        if not combined(call["product"].cols, call["digits"]):
            return program
        return [dataclasses.replace(i, len=i.len // 2) if i.op == Op.ST and i.wd else i for i in program]

    def step_phases(*args, **kwargs):
        call = _arguments(built_phases, *args, **kwargs)
        digits, _ = whole_step.step_numerics(call["config"], call["digits"])
        model = call["model"]
        cols = {p.name: p.cols for p in whole_step.block_products(model, call["weight_digits"])}
        cols.update({"head": model["d_model"], whole_step.RESCORE: model["d_model"]})
        return [dataclasses.replace(p, bytes_out=p.bytes_out // 2) if p.name in cols and combined(cols[p.name], digits)
                else p for p in built_phases(*args, **kwargs)]

    whole_step.linear_program, whole_step.step_phases = linear_program, step_phases
    whole_step.clear_caches()      # the step's cached programs and counters are the patch's
    try:
        yield
    finally:
        whole_step.linear_program, whole_step.step_phases = built_program, built_phases
        whole_step.clear_caches()


def rows(batches, contexts, config=None):
    """``ga2 llm throughput``'s rows on ``config`` (the llm chip) as built and with the sums combined:
    ``[(as built, patched)]``."""
    return compare(patched(), batches, contexts, config)


def main(argv=None):
    args = parser("python -m sim.sums_whatif", __doc__).parse_args(argv)
    print(f"SmolLM2-135M's decode step on the llm chip (ga2 llm throughput's numerics), its products' two digit "
          f"rows' int32 sums stored as built and combined on the chip (a what-if on the cycle model: every product "
          f"of K <= {K_MAX}, so all but down)")
    head = ["batch", "context", "cycles", "host", "of bound", "combined", "host", "of bound"]
    body = [[built["batch"], f"{built['context']:,}", f"{built['cycles']:,}", f"{built['host_cycles']:,}",
             f"{built['fraction_of_bound']:.1%}", f"{faster['cycles']:,}", f"{faster['host_cycles']:,}",
             f"{faster['fraction_of_bound']:.1%}"] for built, faster in rows(args.batches, args.contexts)]
    print(table(head, body, [">"] * len(head)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
