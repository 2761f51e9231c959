"""``python -m synth area|fmax|sweep|figures``: Yosys area, nextpnr-ecp5 Fmax, array-size sweeps and whether the
documented Fmax figures are still those of today's Verilog (docs/SYNTH.md)."""

import argparse
import json
import os
import sys

from ga2_sw.cli import add_config_arguments, config_from_args
from ga2_sw.config import MODES
from ga2_sw.options import (Float, InputFile, Int, IntList, Names, OutputDir, OutputFile, Parsed, Parser, atomic_write,
                            need_matplotlib, run_main)

from .datasheet import DEFAULT_LIMIT, RECORD as DATASHEETS, load_records
from .nextpnr import ROUTERS


def _write(path, obj):
    if path:
        text = json.dumps(obj, indent=1) + "\n"
        with atomic_write(path) as f:
            f.write(text)


def _area(args):
    from .yosys import area
    from .report import area_table
    config = config_from_args(args)
    if args.signals is not None and (args.target != "ecp5" or args.no_flat):
        raise ValueError("--signals reads the flattened ECP5 netlist: it needs --target ecp5 and no --no-flat")
    r = area(config, args.target, flat=not args.no_flat, cache_dir=args.cache_dir)
    print(f"{args.target} synthesis of ga2 {config.rows}x{config.cols} ({r['seconds']} s when computed)")
    print(area_table(r))
    if args.signals is not None:
        from .report import lut_sites_by_signal, signals_table
        from .yosys import ecp5_netlist
        with open(ecp5_netlist(config, args.cache_dir)["json"]) as f:
            groups, total = lut_sites_by_signal(json.load(f), top=args.signals)
        print(f"the flattened netlist's {total:,} LUT sites (nextpnr's TRELLIS_COMB), by the signal the cells drive:")
        print(signals_table(groups, total))
        r = {**r, "signals": [{"signal": s, "lut_sites": n} for s, n in groups], "lut_sites": total}
    _write(args.json, r)
    return 0


SEED_MAX = 2**31 - 1        # nextpnr reads --seed as a signed 32-bit integer


def _seeds(args):
    """The placement seeds of --seeds 1,2,3 (or of the single --seed N): distinct integers 1..SEED_MAX, at least
    one. A bad value is a ValueError: main prints it as one line and exits 2."""
    if args.seeds is not None and args.seed is not None:
        raise ValueError("give --seed N or --seeds N,M,..., not both")
    if args.seeds is None and args.seed is None:
        return [1]
    if args.seed is not None:
        option, text, rule = "--seed", args.seed, "an integer"
    else:
        option, text, rule = "--seeds", args.seeds, "distinct comma-separated integers (at least one)"
    try:                                      # the options' own strict numbers: no '1_000', no full-width digits
        seeds = list(IntList(1, SEED_MAX)(text)) if option == "--seeds" else [Int(1, SEED_MAX)(text)]
    except argparse.ArgumentTypeError:
        seeds = []
    if not seeds or any(not 1 <= n <= SEED_MAX for n in seeds) or len(set(seeds)) != len(seeds):
        raise ValueError(f"{option} takes {rule} in range 1..{SEED_MAX}, not {text!r}")
    return seeds


def _jobs(args):
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs takes an integer of at least 1, not {args.jobs}")
    return args.jobs


def _chip_device(args):
    """The device the catalogue places ``--chip`` on (the default chip's without one)."""
    from ga2_sw.chips import DEFAULT_CHIP, chip
    return chip(args.chip or DEFAULT_CHIP).device


def _fmax(args):
    from .nextpnr import fmax_seeds, DoesNotFit
    from .report import fmax_text
    seeds = _seeds(args)
    jobs = _jobs(args) or 1
    config = config_from_args(args)
    args.device = args.device or _chip_device(args)
    try:
        r = fmax_seeds(config, args.device, seeds=seeds, freq=args.freq, cache_dir=args.cache_dir, jobs=jobs,
                       router=args.router, progress=True, limit=args.limit)
    except DoesNotFit as exc:
        print(f"ga2 {config.rows}x{config.cols}: {exc}", file=sys.stderr)
        _write(args.json, {"config": config.to_dict(), "device": args.device, "fmax_mhz": None,
                           "fmax_mhz_min": None, "fmax_mhz_max": None, "seeds": seeds, "per_seed": [],
                           "does_not_fit": str(exc)})
        return 1
    print(fmax_text(r))
    _write(args.json, r)
    return 0


def _sweep(args):
    from .sweep import run_sweep, plot, make_executor, ROW_KEYS
    from .report import sweep_table
    sizes, modes = list(args.sizes), list(args.modes)     # validated while parsing
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"--sizes names a size twice: {','.join(map(str, sizes))}")
    seeds = _seeds(args)
    jobs = _jobs(args) or min(len(sizes) * len(modes), os.cpu_count() or 1)
    with make_executor(args.executor, jobs) as executor:
        rows = run_sweep(sizes, executor=executor, cache_dir=args.cache_dir, seeds=seeds, do_fmax=not args.no_fmax,
                         modes=modes)
    print(sweep_table(rows))
    if args.json:
        _write(args.json, {"rows": [{k: r.get(k) for k in ROW_KEYS} for r in rows], "details": rows})
    if args.plot:
        for p in plot(rows, args.plot):
            print(f"wrote {p}")
    return 0


def _figures(args):
    """Is every chip's recorded datasheet still of today's Verilog? Exit 1 naming those that are not."""
    from .datasheet import check_records
    from .report import table
    print(f"the chips' datasheets ({args.datasheets}), generating each chip's Verilog", file=sys.stderr, flush=True)
    sheets = check_records(load_records(args.datasheets), cache_dir=args.cache_dir)
    print(table(("chip", "datasheet's Verilog is today's"), [(n, "yes" if ok else "NO: measure again")
                                                            for n, ok in sheets.items()], align=["<", "<"]))
    _write(args.json, {"datasheets": sheets})
    stale = [n for n, ok in sheets.items() if not ok]
    if stale:
        print(f"{len(stale)} datasheets were measured on other Verilog than today's: {', '.join(stale)}; "
              f"run python -m synth datasheet --chip {','.join(stale)}", file=sys.stderr)
        return 1
    return 0


def _datasheet(args):
    from ga2_sw.chips import chip
    from .datasheet import measure, store_record
    from .report import datasheet_text
    records = []
    for name in args.chips:
        record = measure(chip(name), sims=args.sims, limit=args.limit, jobs=args.jobs or 1, cache_dir=args.cache_dir,
                         progress=lambda text: print(text, file=sys.stderr, flush=True), router=args.router)
        store_record(record, args.record)
        records.append(record)
        print(datasheet_text(record))
        print(f"recorded in {args.record}", file=sys.stderr)
    _write(args.json, {"chips": records})
    return 0


def _seed_arguments(p):
    # Validated while parsing (the same rule as _seeds, which then reads the text).
    p.add_argument("--seeds", metavar="N,M,...", type=Parsed(lambda t: _checked_seeds("--seeds", t), "int_list",
                                                             f"1..{SEED_MAX}"),
                   help="nextpnr placement seeds; Fmax is the median over them (default 1)")
    p.add_argument("--seed", metavar="N", type=Parsed(lambda t: _checked_seeds("--seed", t), "int", f"1..{SEED_MAX}"),
                   help="a single seed, the same as --seeds N")


def _checked_seeds(option, text):
    _seeds(argparse.Namespace(**{"seeds": None, "seed": None, option[2:]: text}))
    return text


def _add_datasheet(sub, common):
    p = sub.add_parser("datasheet", parents=[common],
                       help="a named chip's datasheet: area, Fmax of seeds 1, 2, 3, decode steps, tokens/s; recorded")
    p.add_argument("--chip", dest="chips", metavar="NAME[,NAME...]", required=True,
                   type=Names(_chip_names, many=True, what="chip"), help="the chips to measure (ga2 chips lists them)")
    p.add_argument("--limit", type=Int(60, 86400), default=DEFAULT_LIMIT, metavar="S",
                   help="CPU seconds a seed may place and route, 60..86400, before it is recorded as unrouted "
                        "(default %(default)s)")
    p.add_argument("--jobs", type=Int(1, 3), default=None, metavar="N",
                   help="seeds placed at once, 1..3 (default 1)")
    p.add_argument("--router", choices=ROUTERS, default=ROUTERS[0],
                   help="nextpnr's router for every seed, recorded in the datasheet (default %(default)s)")
    p.add_argument("--sims", default=("model", "verilator"), type=Names(lambda: ("model", "verilator", "pysim"),
                                                                        many=True, what="simulator"),
                   help="simulators that run the decode steps (default model,verilator)")
    p.add_argument("--record", metavar="FILE", default=str(DATASHEETS), type=OutputFile(suffixes=(".json",)),
                   help="the record file the datasheets go into (default ga2_sw/datasheets.json)")
    p.set_defaults(func=_datasheet)


def _chip_names():
    from ga2_sw.chips import CHIP_NAMES
    return CHIP_NAMES


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
    p.add_argument("--signals", type=Int(1, 1000), default=None, metavar="N",
                   help="also the N signals whose cells take the most LUT sites in the flattened ECP5 netlist, "
                        "1..1000 (with --target ecp5)")
    add_config_arguments(p)
    p.set_defaults(func=_area)

    p = sub.add_parser("fmax", parents=[common], help="nextpnr-ecp5 place and route: Fmax, utilisation")
    p.add_argument("--target", choices=["ecp5"], default="ecp5")
    p.add_argument("--device", choices=["25k", "45k", "85k"], default=None,
                   help="the ECP5 to place on (default: the --chip's, as ga2 chips lists it)")
    _seed_arguments(p)
    p.add_argument("--jobs", type=Int(1, 1024), default=None, metavar="N",
                   help="run the seeds in a pool of N processes, 1..1024 (default 1: one after another)")
    p.add_argument("--freq", type=Float(1, 2000), default=100, help="target MHz, 1..2000 (default %(default)s)")
    p.add_argument("--limit", type=Int(60, 86400), default=None, metavar="S",
                   help="CPU seconds a seed may place and route, 60..86400, before it is reported unrouted "
                        "(default: no limit; a datasheet's is 3600)")
    p.add_argument("--router", choices=ROUTERS, default=ROUTERS[0],
                   help="nextpnr's router (default %(default)s, every figure of docs/SYNTH.md unless it says "
                        "otherwise; router2 converges where router1 oscillates on a crowded netlist)")
    add_config_arguments(p)
    p.set_defaults(func=_fmax)

    p = sub.add_parser("figures", parents=[common],
                       help="are the chips' recorded datasheets still of today's Verilog? (exit 1 when one is not)")
    p.add_argument("--datasheets", metavar="FILE", default=str(DATASHEETS), type=InputFile(decode=load_records),
                   help="the chips' recorded datasheets (default ga2_sw/datasheets.json)")
    p.set_defaults(func=_figures)

    _add_datasheet(sub, common)

    p = sub.add_parser("sweep", parents=[common], help="area, Fmax and decode cycles over square array sizes")
    p.add_argument("--sizes", default="2,4,8,16", type=IntList(1, 32), help="array sizes n, n x n (default %(default)s)")
    p.add_argument("--modes", default="inorder", metavar="M,...", type=Names(lambda: MODES, many=True, what="mode"),
                   help="execution modes, a row per size and mode: inorder, decoupled (default %(default)s)")
    p.add_argument("--jobs", type=Int(1, 1024), default=None, metavar="N",
                   help="workers, 1..1024 (default: min(sizes x modes, CPUs))")
    p.add_argument("--executor", choices=["process", "dask"], default="process",
                   help="process: a process pool; dask: a dask.distributed LocalCluster of --jobs worker "
                        "processes (pip install distributed) (default %(default)s)")
    _seed_arguments(p)
    p.add_argument("--plot", metavar="DIR", type=OutputDir(needs=need_matplotlib), help="write PNG plots into DIR")
    p.add_argument("--no-fmax", action="store_true", help="area and cycles only (no place and route)")
    p.set_defaults(func=_sweep)
    return parser


def main(argv=None):
    return run_main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
