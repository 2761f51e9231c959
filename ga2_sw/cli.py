"""The ``ga2`` command: one subcommand per job. Each subcommand lives in its own module, which provides
``register(subparsers)``; the module's handler is stored as the parser's ``func`` default, and a check of
its options that needs more than one of them as its ``check`` default (``ga2_sw.options.run_main`` runs it
before the handler). Every option has a validator of ``ga2_sw.options``, so a bad value is refused while
the command line is parsed, before any work starts."""

import importlib
from importlib.metadata import entry_points
import sys

from .config import Config
from .options import Int, Names, Parser, run_main

__all__ = ["main", "build_parser", "add_config_arguments", "config_from_args"]

# Modules that register subcommands, in the order `ga2 --help` lists them.
_COMMAND_MODULES = [
    "ga2_sw.commands.tools",          # asm, disasm, run
    "ga2_sw.commands.batching",       # check-batching, accuracy, mutants
    "ga2_sw.commands.decode_table",   # decode-table
    "ga2_sw.commands.prefill",        # prefill
    "ga2_sw.commands.llm",            # llm fetch, generate, eval, scores
    "ga2_sw.analyses.traffic",
    "ga2_sw.analyses.planner",
    "ga2_sw.analyses.model7b",
    "ga2_sw.analyses.serving",
    "ga2_sw.analyses.latency",
    "ga2_sw.analyses.banks",
    "ga2_sw.analyses.bus",
    "ga2_sw.analyses.matrix_lane",
    "ga2_sw.analyses.weight_stream",
    "ga2_hdl.commands",               # generate
    "sim.commands",                   # bench-sim
    "synth.commands",                 # chips
]


def add_config_arguments(parser, mode=True, chip=None):
    """``--chip NAME`` and one option per Config field (--rows, --cols, ...). The configuration is the chip's
    (``chip``: the command's default chip, ``DEFAULT_CHIP`` unless given), and each field option given beside
    ``--chip`` overrides that one field, as ``ga2_sw.chips.config_of(name, **fields)`` does. ``mode=False``
    leaves out --mode for a command that defines its own (decode-table runs both modes)."""
    from .chips import CHIP_NAMES, DEFAULT_CHIP
    default_chip = chip or DEFAULT_CHIP
    group = parser.add_argument_group("configuration", "a chip of the catalogue (ga2 chips lists them), and "
                                      "any of its fields changed")
    group.add_argument("--chip", metavar="NAME", type=Names(lambda: CHIP_NAMES, what="chip"), default=default_chip,
                       help=f"the chip to build, one of {', '.join(CHIP_NAMES)} (default %(default)s); the options "
                            f"below change single fields of it")
    for name, text in Config.field_help().items():
        if name == "mode" and not mode:
            continue
        option = f"--{name.replace('_', '-')}"
        if name in ("mode", "memory"):
            group.add_argument(option, dest=f"cfg_{name}", choices=Config.field_range(name), default=None,
                               help=f"{text} (default: the chip's)")
            continue
        lo, hi = Config.field_range(name)
        group.add_argument(option, dest=f"cfg_{name}", type=Int(lo, hi), metavar="N", default=None,
                           help=f"{text} ({lo}..{hi}; default: the chip's)")
    parser.set_defaults(configure=config_from_args)     # run_main builds it before the command runs


def config_from_args(args, drop=(), **fixed):
    """The Config of a command's options: the ``--chip`` with every field option given (not None) in place
    of the chip's. A command's own ``--mode`` (decode-table's), when it names one mode, is the mode field.
    ``fixed``: fields the command itself decides (weight-stream's memory: its rows run their own), under the
    options given; ``drop``: field options to leave out (those a command sizes and checks itself)."""
    from .chips import DEFAULT_CHIP, config_of
    fields = {k[4:]: v for k, v in vars(args).items() if k.startswith("cfg_") and v is not None and k[4:] not in drop}
    if "mode" not in fields and getattr(args, "mode", None) in Config.field_range("mode"):
        fields["mode"] = args.mode
    return config_of(getattr(args, "chip", None) or DEFAULT_CHIP, **{**fixed, **fields})


def build_parser():
    """The ``ga2`` parser with every subcommand registered."""
    parser = Parser(prog="ga2", description="GA-2: a batched-decode accelerator generator. Exit statuses: "
                    "0 done, 1 a difference or a fault, 2 bad usage or input, 3 a simulation hang, 4 a missing "
                    "tool (README, 'Exit statuses').")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:       # a part of the project not built yet must not break the rest
            if exc.name and name.startswith(exc.name):
                continue
            raise
        module.register(sub)
    # Packages above ga2_sw add their commands through the "ga2.commands" entry point (ga2_soc: ``ga2 soc``),
    # so that ga2_sw never names them.
    for entry in sorted(entry_points(group="ga2.commands"), key=lambda e: e.name):
        entry.load().register(sub)
    return parser


def main(argv=None):
    """``ga2``: returns the exit status (README, "Exit statuses")."""
    return run_main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
