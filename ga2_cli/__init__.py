"""The ``ga2`` command line, at the top of the layers (``ga2_sw`` < ``ga2_hdl`` < ``sim`` < ``synth`` <
``ga2_soc`` < ``ga2_cli``): one subcommand per job, each in a module that provides ``register(subparsers)``.
A module's handler is stored as its parser's ``func`` default, and a check of its options that needs more than
one of them as its ``check`` default (``ga2_sw.options.run_main`` runs it before the handler). Every option
has a validator of ``ga2_sw.options``, so a bad value is refused while the command line is parsed, before any
work starts.

The commands that run a simulator (``commands/``, and the analyses ``analyses/bus``, ``latency`` and
``weight_stream``) live here, above ``sim``; the others stay beside what they compute."""

import importlib
import sys

from ga2_sw.options import Parser, run_main

__all__ = ["main", "build_parser"]

# Modules that register subcommands, in the order `ga2 --help` lists them.
COMMAND_MODULES = [
    "ga2_cli.commands.tools",          # asm, disasm, run
    "ga2_cli.commands.batching",       # check-batching, accuracy, mutants
    "ga2_cli.commands.decode_table",   # decode-table
    "ga2_cli.commands.prefill",        # prefill
    "ga2_cli.commands.llm",            # llm fetch, generate, eval, scores, steps, cycles, throughput, llama-check
    "ga2_sw.analyses.traffic",
    "ga2_sw.analyses.planner",
    "ga2_sw.analyses.model7b",
    "ga2_sw.analyses.serving",
    "ga2_cli.analyses.latency",
    "ga2_sw.analyses.banks",
    "ga2_cli.analyses.bus",
    "ga2_sw.analyses.matrix_lane",
    "ga2_cli.analyses.weight_stream",
    "ga2_hdl.commands",                # generate
    "sim.commands",                    # fuzz, bench-sim, cache
    "synth.commands",                  # chips
    "ga2_soc.commands",                # soc sim, soc build
]


def build_parser():
    """The ``ga2`` parser with every subcommand registered."""
    parser = Parser(prog="ga2", description="GA-2: a batched-decode accelerator generator. Exit statuses: "
                    "0 done, 1 a difference or a fault, 2 bad usage or input, 3 a simulation hang, 4 a missing "
                    "tool (README, 'Exit statuses').")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv=None):
    """``ga2``: returns the exit status (README, "Exit statuses")."""
    return run_main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
