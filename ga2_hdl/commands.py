"""``generate``: the chip's Verilog (also ``python -m ga2_hdl generate``)."""

import sys

__all__ = ["register", "build_parser", "main"]


def _generate(args):
    from ga2_sw.cli import config_from_args
    from ga2_sw.options import atomic_write
    from .generate import generate_verilog
    text = generate_verilog(config_from_args(args), name=args.name)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        with atomic_write(args.output) as f:
            f.write(text)
        print(f"wrote {args.output} ({len(text.splitlines()):,} lines)", file=sys.stderr)
    return 0


def register(sub):
    from ga2_sw.cli import add_config_arguments
    from ga2_sw.options import Identifier, OutputFile
    p = sub.add_parser("generate", help="write the chip's Verilog")
    p.add_argument("-o", "--output", metavar="FILE.v", type=OutputFile(stdout=True),
                   help="output file (default, or -: standard output)")
    p.add_argument("--name", default="ga2", type=Identifier(),
                   help="top module name, a Verilog identifier (default %(default)s)")
    add_config_arguments(p)
    p.set_defaults(func=_generate)


def build_parser():
    from ga2_sw.options import Parser
    parser = Parser(prog="python -m ga2_hdl", description="The GA-2 chip's Verilog. Exit statuses as ga2's "
                    "(README, 'Exit statuses').")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register(sub)
    return parser


def main(argv=None):
    """``python -m ga2_hdl``: returns the exit status (README, "Exit statuses")."""
    from ga2_sw.options import run_main
    return run_main(build_parser(), argv)
