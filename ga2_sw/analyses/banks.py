"""``ga2 banks``: how often the matrix unit's k-slices would meet on a scratchpad bank, for candidate bank maps.

A design study for the buildable decoupled chip (docs/ARCHITECTURE.md, "the scratchpad designs compared"): a
banked scratchpad serves one operand per bank per cycle, so a slice whose ``M + N`` operand addresses put ``n``
of them on one bank takes ``n`` cycles instead of one. This counts, over every MM of the decode-table programs,
the extra slice cycles each bank map would cost with the programs laid out as they are."""

from .. import banking
from ..isa import Op
from .common import emit, json_option, progress_bar, table

__all__ = ["BANK_MAPS", "slice_addresses", "bank_conflicts", "register"]

# name -> (banks, address -> bank). "row-skew" is the chip's map (``banking.bank_of``): a + (a >> log2(Nb)).
BANK_MAPS = {
    "mod 8": (8, lambda a: a % 8),
    "mod 16": (16, lambda a: a % 16),
    "xor-skew 8": (8, lambda a: (a ^ (a >> 4)) % 8),
    "add-skew 8": (8, lambda a: (a + (a >> 4)) % 8),
    "row-skew 8": (8, lambda a: (a + (a >> 3)) % 8),
    "add-skew 16": (16, lambda a: (a + (a >> 4)) % 16),
}


def slice_addresses(mm):
    """The scratchpad addresses of each k-slice of an MM: A's column k, then Bop's row k."""
    for k in range(mm.K):
        yield banking.slice_addresses(mm, k)


def bank_conflicts(programs, bank_of, progress=None):
    """(slices, extra slice cycles, worst operands on one bank) over the MMs of ``programs``; ``progress()``
    after each program."""
    slices = extra = worst = 0
    for program in programs:
        if progress:
            progress()
        for instr in program:
            if instr.op != Op.MM:
                continue
            for addresses in slice_addresses(instr):
                load = banking.most_on_one_bank(map(bank_of, addresses))
                slices, extra, worst = slices + 1, extra + load - 1, max(worst, load)
    return slices, extra, worst


def _run(args):
    from ..cli import config_from_args
    from ..workloads import decode_table_count, decode_table_programs
    config = config_from_args(args).replace(mode="decoupled")
    bar = progress_bar(decode_table_count(config) * (1 + len(BANK_MAPS)), args.no_progress, "program")

    def tick():
        bar.update(1)
    programs = [p.program for p in decode_table_programs(config, progress=tick)]
    rows = []
    for name, (banks, bank_of) in BANK_MAPS.items():
        slices, extra, worst = bank_conflicts(programs, bank_of, tick)
        rows.append({"map": name, "banks": banks, "slices": slices, "extra_cycles": extra, "worst_load": worst})
    bar.close()
    print(f"Bank conflicts of the matrix unit's k-slices, decode-table programs of the decoupled "
          f"{config.rows}x{config.cols} chip as laid out today")
    print(table(["bank map", "banks", "k-slices", "extra slice cycles", "worst operands on a bank"],
                [[r["map"], r["banks"], r["slices"], r["extra_cycles"], r["worst_load"]] for r in rows]))
    return emit(args, {"config": config.to_dict(), "rows": rows}, None)


def register(sub):
    from ..cli import add_config_arguments
    p = sub.add_parser("banks", help="bank conflicts of the matrix unit's operand slices under candidate bank maps",
                       description=__doc__.split("\n\n")[0])
    add_config_arguments(p, mode=False)
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the results as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run, plot=None)
