"""The configuration options every command line shares: ``--chip NAME`` and one option per ``Config`` field
(``add_config_arguments``), and the ``Config`` they ask for (``config_from_args``). The ``ga2`` command line
itself is assembled at the top of the layers, in ``ga2_cli``."""

from .config import Config
from .options import Int, Names

__all__ = ["add_config_arguments", "config_from_args"]

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
