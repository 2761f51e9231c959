"""``generate``: the chip's Verilog (also ``python -m ga2_hdl generate``)."""

import sys

__all__ = ["register", "main"]


def _generate(args):
    from ga2_sw.cli import config_from_args
    from .generate import generate_verilog
    text = generate_verilog(config_from_args(args), name=args.name)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output} ({len(text.splitlines()):,} lines)", file=sys.stderr)
    return 0


def register(sub):
    from ga2_sw.cli import add_config_arguments
    p = sub.add_parser("generate", help="write the chip's Verilog")
    p.add_argument("-o", "--output", metavar="FILE.v", help="output file (default: standard output)")
    p.add_argument("--name", default="ga2", help="top module name (default %(default)s)")
    add_config_arguments(p)
    p.set_defaults(func=_generate)


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(prog="python -m ga2_hdl")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    register(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"python -m ga2_hdl {args.command}: error: {exc}", file=sys.stderr)
        return 2
