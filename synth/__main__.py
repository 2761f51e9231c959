"""``python -m synth area|fmax|sweep``: Yosys area, nextpnr-ecp5 Fmax and array-size sweeps (docs/SYNTH.md)."""

import argparse
import json
import sys

from ga2_sw.cli import add_config_arguments, config_from_args
from ga2_sw.options import (SEED, Float, Int, IntList, OutputDir, OutputFile, Parser, atomic_write, need_matplotlib,
                            run_main)


def _write(path, obj):
    if path:
        text = json.dumps(obj, indent=1) + "\n"
        with atomic_write(path) as f:
            f.write(text)


def _synthesisable(config):
    """Decoupled mode is refused up front instead of failing deep inside Yosys after minutes."""
    if config.decoupled:
        raise ValueError("--mode decoupled cannot be synthesised yet: its scratchpad has two write ports (DMA and "
                         "compute) on one memory, which no ECP5 block RAM offers, so Yosys builds it from logic "
                         "(1.59 M cells for 4,096 words, after which ABC fails); see docs/SYNTH.md, "
                         "'Decoupled mode'")
    return config


def _area(args):
    from .yosys import area
    from .report import area_table
    config = _synthesisable(config_from_args(args))
    r = area(config, args.target, flat=not args.no_flat, cache_dir=args.cache_dir)
    print(f"{args.target} synthesis of ga2 {config.rows}x{config.cols} ({r['seconds']} s when computed)")
    print(area_table(r))
    _write(args.json, r)
    return 0


def _fmax(args):
    from .nextpnr import fmax, DoesNotFit
    from .report import fmax_text
    config = _synthesisable(config_from_args(args))
    try:
        r = fmax(config, args.device, seed=args.seed, freq=args.freq, cache_dir=args.cache_dir)
    except DoesNotFit as exc:
        print(f"ga2 {config.rows}x{config.cols}: {exc}", file=sys.stderr)
        _write(args.json, {"config": config.to_dict(), "device": args.device, "fmax_mhz": None,
                           "does_not_fit": str(exc)})
        return 1
    print(fmax_text(r))
    _write(args.json, r)
    return 0


def _sweep(args):
    from .sweep import run_sweep, plot, ROW_KEYS
    from .report import sweep_table
    sizes = list(args.sizes)
    rows = run_sweep(sizes, jobs=args.jobs, cache_dir=args.cache_dir, seed=args.seed, do_fmax=not args.no_fmax)
    print(sweep_table(rows))
    if args.json:
        _write(args.json, {"rows": [{k: r.get(k) for k in ROW_KEYS} for r in rows], "details": rows})
    if args.plot:
        for p in plot(rows, args.plot):
            print(f"wrote {p}")
    return 0


def build_parser():
    parser = Parser(prog="python -m synth", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", metavar="FILE", type=OutputFile(), help="write the result as JSON")
    common.add_argument("--cache-dir", metavar="DIR", type=OutputDir(),
                        help="result cache (default $GA2_SYNTH_CACHE or ~/.cache/ga2-synth)")

    p = sub.add_parser("area", parents=[common], help="Yosys cell counts, whole chip and per unit")
    p.add_argument("--target", choices=["generic", "ecp5"], default="generic")
    p.add_argument("--no-flat", action="store_true", help="skip the flattened whole-chip synthesis")
    add_config_arguments(p)
    p.set_defaults(func=_area)

    p = sub.add_parser("fmax", parents=[common], help="nextpnr-ecp5 place and route: Fmax, utilisation")
    p.add_argument("--target", choices=["ecp5"], default="ecp5")
    p.add_argument("--device", choices=["25k", "45k", "85k"], default="25k")
    p.add_argument("--seed", type=Int(*SEED), default=1, help="nextpnr seed (default %(default)s)")
    p.add_argument("--freq", type=Float(1, 2000), default=100, help="target MHz, 1..2000 (default %(default)s)")
    add_config_arguments(p)
    p.set_defaults(func=_fmax)

    p = sub.add_parser("sweep", parents=[common], help="area, Fmax and decode cycles over square array sizes")
    p.add_argument("--sizes", default="2,4,8,16", type=IntList(1, 32), help="array sizes n, n x n (default %(default)s)")
    p.add_argument("--jobs", type=Int(1, 1024), default=None, help="worker processes (default: min(sizes, CPUs))")
    p.add_argument("--seed", type=Int(*SEED), default=1, help="nextpnr seed (default %(default)s)")
    p.add_argument("--plot", metavar="DIR", type=OutputDir(needs=need_matplotlib),
                   help="write PNG plots into DIR")
    p.add_argument("--no-fmax", action="store_true", help="area and cycles only (no place and route)")
    p.set_defaults(func=_sweep)

    return parser


def main(argv=None):
    return run_main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
