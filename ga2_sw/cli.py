"""The ``ga2`` command: one subcommand per job. Each subcommand lives in its own module, which provides
``register(subparsers)``; the module's handler is stored as the parser's ``func`` default, and a check of
its options that needs more than one of them as its ``check`` default (``ga2_sw.options.run_main`` runs it
before the handler). Every option has a validator of ``ga2_sw.options``, so a bad value is refused while
the command line is parsed, before any work starts."""

import importlib
import sys

from .config import COMMAND_MODE, Config
from .options import Int, Parser, run_main

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
]


def add_config_arguments(parser, mode=True):
    """--rows, --cols, ... one option per Config field, defaulting to the Config defaults. ``mode=False``
    leaves out --mode for a command that defines its own (decode-table runs both modes)."""
    group = parser.add_argument_group("configuration")
    defaults = Config()
    for name, text in Config.field_help().items():
        if name == "mode" and not mode:
            continue
        if name == "mode":
            group.add_argument("--mode", dest="cfg_mode", choices=Config.field_range("mode"),
                               default=COMMAND_MODE.value, help=f"{text} (default %(default)s; inorder is the chapter's chip)")
            continue
        if name == "memory":
            group.add_argument("--memory", dest="cfg_memory", choices=Config.field_range("memory"),
                               default=defaults.memory, help=f"{text} (default %(default)s)")
            continue
        lo, hi = Config.field_range(name)
        if name == "axi":               # 1 with a DRAM unless given (config_from_args)
            group.add_argument("--axi", dest="cfg_axi", type=Int(lo, hi), metavar="N", default=None,
                               help=f"{text} ({lo}..{hi}; default 1 with a DRAM --memory, else 0)")
            continue
        if name == "online_unit":       # decided by the context unless given (config_from_args)
            group.add_argument("--online-unit", dest="cfg_online_unit", type=Int(lo, hi), metavar="N",
                               default=None, help=f"{text} ({lo}..{hi}; default 1 when --max-ctx exceeds "
                                                  f"--sm-max-len, else 0)")
            continue
        group.add_argument(f"--{name.replace('_', '-')}", dest=f"cfg_{name}", type=Int(lo, hi), metavar="N",
                           default=getattr(defaults, name), help=f"{text} ({lo}..{hi}; default %(default)s)")


def config_from_args(args):
    """The Config of a command's options. A field whose option defaults to None (a command that sizes it
    itself, as ``ga2 prefill`` sizes the memories) takes Config's default here."""
    fields = {k[4:]: v for k, v in vars(args).items() if k.startswith("cfg_") and v is not None}
    if "mode" not in fields and getattr(args, "mode", None) in Config.field_range("mode"):
        fields["mode"] = args.mode      # a command's own --mode (decode-table's), when it names one mode
    if "axi" not in fields:             # a DRAM answers the AXI4 port
        fields["axi"] = int(fields.get("memory", Config.memory) != "ideal")
    if "online_unit" not in fields:     # a context longer than one softmax holds streams through the online unit
        fields["online_unit"] = int(fields.get("max_ctx", Config.max_ctx) > fields.get("sm_max_len", Config.sm_max_len))
    return Config(**fields)


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
    return parser


def main(argv=None):
    """``ga2``: returns the exit status (README, "Exit statuses")."""
    return run_main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
