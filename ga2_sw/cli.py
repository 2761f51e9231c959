"""The ``ga2`` command: one subcommand per job. Each subcommand lives in its own module, which provides
``register(subparsers)``; the module's handler is stored as the parser's ``func`` default."""

import argparse
import importlib
import sys

from .config import Config

__all__ = ["main", "add_config_arguments", "config_from_args"]

# Modules that register subcommands, in the order `ga2 --help` lists them.
_COMMAND_MODULES = [
    "ga2_sw.commands.tools",          # asm, disasm, run
    "ga2_sw.commands.batching",       # check-batching, accuracy, mutants
    "ga2_sw.commands.decode_table",   # decode-table
    "ga2_sw.analyses.traffic",
    "ga2_sw.analyses.planner",
    "ga2_sw.analyses.model7b",
    "ga2_sw.analyses.serving",
    "ga2_sw.analyses.latency",
    "ga2_sw.analyses.banks",
    "ga2_hdl.commands",               # generate
    "sim.commands",                   # bench-sim
]


def add_config_arguments(parser, mode=True):
    """--rows, --cols, ... one option per Config field, defaulting to the Config defaults. ``mode=False``
    leaves out --mode for a command that defines its own (decode-table runs both modes)."""
    group = parser.add_argument_group("configuration")
    for name, text in Config.field_help().items():
        if name == "mode" and not mode:
            continue
        if name == "mode":
            group.add_argument("--mode", dest="cfg_mode", choices=Config.field_range("mode"),
                               default=Config().mode.value, help=f"{text} (default %(default)s)")
            continue
        lo, hi = Config.field_range(name)
        group.add_argument(f"--{name.replace('_', '-')}", dest=f"cfg_{name}", type=int, metavar="N",
                           default=getattr(Config(), name), help=f"{text} ({lo}..{hi}; default %(default)s)")


def config_from_args(args):
    fields = {k[4:]: v for k, v in vars(args).items() if k.startswith("cfg_")}
    return Config(**fields)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ga2", description="GA-2: a batched-decode accelerator generator")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:       # a part of the project not built yet must not break the rest
            if exc.name and name.startswith(exc.name):
                continue
            raise
        module.register(sub)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except ValueError as exc:                    # bad input: one clear line, no traceback
        print(f"ga2 {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:                      # `ga2 ... | head`: the reader left, nothing is wrong
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
