"""``ga2 check-batching``, ``ga2 accuracy`` and ``ga2 mutants``: the batched builder's oracle, the integer
model's error against float attention, and the mutation test of the oracle."""

import os
import time

from ga2_sw import decode as dec
from ga2_sw.analyses.common import json_option, progress_bar, table, write_json
from ga2_sw.check import check_batching, ragged_lengths, DEFAULT_LENGTHS, DEFAULT_SEEDS
from ga2_sw.cli import add_config_arguments, config_from_args
from ga2_sw.config import Config
from ga2_sw.numerics import KEY_DIGITS, ONLINE_MAX_CTX
from ga2_sw.layout import Layout
from ga2_sw.options import SEED, Float, Int, IntList, Names, Parsed

__all__ = ["register", "count_programs", "accuracy"]


# What the options take; the configuration narrows lengths and batches further (``_check_*``).
_SEEDS = IntList(*SEED)
_LENGTHS = IntList(1, Config.field_range("max_ctx")[1])
_ACCURACY_LENGTHS = IntList(1, ONLINE_MAX_CTX)      # --online reaches past max_ctx (docs/LONG_CONTEXT.md)
_BATCHES = IntList(1, Config.field_range("rows")[1])
_JOBS = (1, 1024)
_TIMEOUT = (1.0, 7 * 24 * 3600.0)


def _fitting_lengths(lengths, config):
    if not any(L <= config.max_ctx for L in lengths):
        raise ValueError(f"--lengths: no context length in {','.join(map(str, lengths))} fits config field "
                         f"'max_ctx' ({config.max_ctx}); raise --max-ctx or give shorter lengths")
    return lengths


def _check_batching_args(args):
    from ga2_sw.check import require_chapter_path
    config = config_from_args(args)
    require_chapter_path(config, "check-batching")
    Layout(config)
    from sim.backends import get_backend
    get_backend(args.sim).require()              # a simulator that cannot run here: exit status 4, now
    _fitting_lengths(args.lengths, config)
    bad = [b for b in (args.batches or ()) if b > config.rows]
    if bad:
        raise ValueError(f"--batches: batch sizes must be in 1..{config.rows} (config field 'rows'), not {bad[0]}")


def _long_context(args, config):
    """Whether ``ga2 accuracy`` measures the long-context numerics: asked for with --online, or a length given
    past the chapter path's cache (--max-ctx), which only the online softmax reaches."""
    return args.online or any(L > config.max_ctx for L in args.lengths or ())


def _accuracy_lengths(args, config):
    """The lengths given, or the default ones (those within --max-ctx on the chapter's path: 1 always is)."""
    if args.lengths:
        return args.lengths
    return [L for L in DEFAULT_LENGTHS if _long_context(args, config) or L <= config.max_ctx]


def _check_accuracy(args):
    config = config_from_args(args)
    if _long_context(args, config):
        return                                  # a head's numerics: no layout, any length up to ONLINE_MAX_CTX
    if args.budget:
        raise ValueError("--budget goes with --online (the error budget of the long-context numerics)")
    if args.key_digits != 1:
        raise ValueError("--key-digits goes with --online (wide keys are a long-context option)")
    Layout(config)


def _rtl_label(text):
    """A text that is part of at least one RTL mutant's label (``ga2 mutants --rtl --only``)."""
    from sim.rtl_mutants import RTL_MUTANTS
    if not text.strip() or not any(text in m.label for m in RTL_MUTANTS):
        raise ValueError(f"no RTL mutant label contains {text!r} (`ga2 mutants --rtl --no-baseline --only` "
                         f"selects by part of a label)")
    return text


def _source_tree(text):
    """worktree, head, or a folder holding a GA-2 tree (with ga2_hdl/ and tests/)."""
    import os
    if text in ("worktree", "head"):
        return text
    if not text or not (os.path.isdir(os.path.join(text, "ga2_hdl")) and os.path.isdir(os.path.join(text, "tests"))):
        raise ValueError(f"must be worktree, head or a folder holding a GA-2 tree (ga2_hdl/, tests/), not {text!r}")
    return text


def _check_mutants(args):
    if not args.rtl:
        from ga2_sw.check import require_chapter_path
        require_chapter_path(config_from_args(args), "mutants")
        Layout(config_from_args(args))          # a configuration the decode layout cannot hold: fail now
        given = [o for o, v in (("--only", args.only), ("--timeout", args.timeout), ("--no-baseline", args.no_baseline),
                                ("--source", args.source)) if v]
        if given:
            raise ValueError(f"{given[0]} needs --rtl")


def register(sub):
    from sim.backends import backend_names
    p = sub.add_parser("check-batching", help="batch invariance of the batched decode builder (and its "
                       "integer reference), on the model or a simulator")
    p.add_argument("--sim", default="model", metavar="NAME", type=Names(backend_names, what="simulator"),
                   help=f"what runs the programs: {', '.join(backend_names())} (sim.backends; default %(default)s)")
    p.add_argument("--no-ragged", action="store_true", help="leave out the ragged batch")
    p.add_argument("--seeds", default=",".join(map(str, DEFAULT_SEEDS)), metavar="S,S", type=_SEEDS,
                   help=f"workload seeds, each in {_SEEDS.describe()} (default %(default)s)")
    p.add_argument("--lengths", default=",".join(map(str, DEFAULT_LENGTHS)), metavar="L,L", type=_LENGTHS,
                   help="context lengths decoded step by step (default %(default)s; longer than --max-ctx are "
                        "skipped)")
    p.add_argument("--batches", metavar="B,B", type=_BATCHES, help="batch sizes, each in 1..--rows (default 1..rows)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_arguments(p)
    p.set_defaults(func=_check_batching, check=_check_batching_args)

    p = sub.add_parser("accuracy", help="error of the integer decode step against float attention, in output LSBs")
    p.add_argument("--seeds", default=",".join(map(str, DEFAULT_SEEDS)), metavar="S,S", type=_SEEDS,
                   help=f"workload seeds, each in {_SEEDS.describe()} (default %(default)s)")
    p.add_argument("--lengths", metavar="L,L", type=_ACCURACY_LENGTHS,
                   help=f"context lengths, each in 1..{ONLINE_MAX_CTX} (default {','.join(map(str, DEFAULT_LENGTHS))}, "
                        "those within --max-ctx unless --online; a length given past --max-ctx measures every length "
                        "with the long-context numerics, as --online does)")
    p.add_argument("--online", action="store_true",
                   help="the long-context numerics instead of the chapter's decode step (implied by a length past "
                        "--max-ctx; docs/LONG_CONTEXT.md): one head of dimension --d over "
                        "each length, chunks of --sm-max-len tokens through the online softmax, random and peaked "
                        "workloads; computed by ga2_sw.numerics in Python, the integers the chip's programs compute "
                        "(docs/LONG_CONTEXT.md)")
    p.add_argument("--budget", action="store_true",
                   help="with --online: also where the error comes from, float attention with one approximation "
                        "at a time (int8 q, K, V; wide keys; score resolution; weight bits)")
    p.add_argument("--key-digits", metavar="N", type=Int(min(KEY_DIGITS), max(KEY_DIGITS)), default=1,
                   help="with --online: int8 digits per key, 1..2 (default 1; 2 is wide keys, 15 bits: "
                        "docs/LONG_CONTEXT.md)")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the results as JSON")
    add_config_arguments(p)
    p.set_defaults(func=_accuracy, check=_check_accuracy)

    p = sub.add_parser("mutants", help="mutation test of the batch-invariance check: the chapter's 16 broken "
                       "builders and this project's own",
                       description="Applies each mutant to a copy of ga2_sw and runs the check on it in a "
                       "subprocess, with and without the ragged batch. Exit status 1 unless the full check "
                       "catches all 16 of the chapter's mutants and the check without the ragged batch catches "
                       "exactly 13 (all but the three that confuse sequence lengths). JSON: {\"mutants\": "
                       "[{\"label\", \"own\", \"caught_full\", \"caught_no_ragged\", ...}], \"full\", "
                       "\"no_ragged\", \"total\" (the chapter's mutants), \"own\": {\"full\", \"no_ragged\", \"total\"}}")
    p.add_argument("--jobs", type=Int(*_JOBS), default=None, metavar="N",
                   help=f"mutant checks run in parallel, {_JOBS[0]}..{_JOBS[1]} (default: the CPU count, 2 with --rtl)")
    p.add_argument("--chapter-only", action="store_true", help="only the chapter's 16 mutants")
    p.add_argument("--json", metavar="FILE", type=json_option(), help="write the results as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--rtl", action="store_true",
                   help="mutation test of the RTL instead (sim/rtl_mutants.py): each mutant breaks a copy of "
                   "ga2_hdl and runs a fixed selection of the project's tests on it; --jobs defaults to 2 here")
    p.add_argument("--only", nargs="+", metavar="LABEL", type=Parsed(_rtl_label, what="part of an RTL mutant label"),
                   help="with --rtl: only the mutants whose label contains one of these texts")
    p.add_argument("--timeout", type=Float(*_TIMEOUT), default=None, metavar="S",
                   help=f"with --rtl: seconds per mutant before it counts as a timeout, {_TIMEOUT[0]:g}..{_TIMEOUT[1]:g} "
                        f"(default 900)")
    p.add_argument("--no-baseline", action="store_true", help="with --rtl: skip the unmutated run")
    p.add_argument("--source", default=None, metavar="worktree|head|DIR", type=Parsed(_source_tree, what="a tree"),
                   help="with --rtl: the tree the mutants are made from, frozen at the start of the run: a "
                   "snapshot of the working tree (default), of the committed tree plus the mutation tool's own "
                   "files (head), or a directory")
    add_config_arguments(p)
    p.set_defaults(func=_mutants, check=_check_mutants)


# -- check-batching ------------------------------------------------------------------------------------

def count_programs(config, batches, lengths, seeds, ragged):
    """How many programs check_batching runs with these arguments (the progress bar's total)."""
    n = sum(L * (1 + nseq) for nseq in batches for L in lengths if L <= config.max_ctx) * len(seeds)
    if ragged:
        lens = ragged_lengths(config)
        n += len(seeds) * (sum(t - 1 for t in lens) + 1 + len(lens))
    return n


def _check_batching(args):
    from sim.backends import get_backend
    config = config_from_args(args)
    seeds, lengths = args.seeds, args.lengths
    batches = args.batches or tuple(range(1, config.rows + 1))
    runner = get_backend(args.sim).runner(config)
    ragged = not args.no_ragged
    print(f"batch invariance on {args.sim}: batches {', '.join(map(str, batches))}; lengths "
          f"{', '.join(str(L) for L in lengths if L <= config.max_ctx)}; seeds {', '.join(map(str, seeds))}; "
          + (f"ragged batch {ragged_lengths(config)}" if ragged else "no ragged batch"))
    start = time.perf_counter()
    programs = 0

    def tick(n):
        nonlocal programs
        programs += n
        bar.update(n)
    try:
        with progress_bar(count_programs(config, batches, lengths, seeds, ragged), args.no_progress, "prog") as bar:
            problems = check_batching(config, batches=batches, lengths=lengths, seeds=seeds, ragged=ragged,
                                      runner=runner, progress=tick)
    finally:
        getattr(runner, "close", lambda: None)()
    elapsed = time.perf_counter() - start
    if problems:
        print(f"problems ({len(problems)}):")
        for p in problems:
            print(f"  {p}")
    else:
        print("problems: none")
    print(f"{programs} programs in {elapsed:.1f} s")
    return 1 if problems else 0


# -- accuracy ----------------------------------------------------------------------------------------

def accuracy(config, lengths=DEFAULT_LENGTHS, seeds=DEFAULT_SEEDS, runner=None):
    """Error of every decode step of the invariance check's single-sequence workloads against float attention.

    For each step t of a sequence of length L, the int8 output out8 (run on ``runner``, default the reference
    machine) is compared with the float attention output of the unquantised model, in output LSBs:
    |out8 - float / scale_o|. Returns {"lengths": [{"L", "steps", "max", "mean"}], "max", "mean", ...}."""
    from ga2_sw.check import machine_runner
    run = runner or machine_runner(config)
    if any(L > config.max_ctx for L in lengths):
        raise ValueError(f"lengths past config field 'max_ctx' ({config.max_ctx}): the chapter's decode step "
                         f"holds at most max_ctx tokens (the long-context numerics: analyses.long_context)")
    per_length, everything = [], []
    for L in lengths:
        errors = []
        for seed in seeds:
            w = dec.make_workload(config, 1, L, 7000 + 31 * 1 + 5 * L + seed)   # check_batching's B=1 workloads
            P, so = dec.rq_params(w), w.scales["o"]
            ext = dec.ext_image(w)
            for t in range(1, L + 1):
                ext = run(dec.program(config, [0], [t], P), ext)
                out8 = dec.outputs(config, ext, 0)
                ref = dec.float_reference(w, 0, t)
                errors += [abs(o - float(f) / so) for o, f in zip(out8, ref)]
        per_length.append({"L": L, "steps": L * len(seeds), "values": len(errors), "max": max(errors),
                           "mean": sum(errors) / len(errors)})
        everything += errors
    return {"lengths": per_length, "seeds": list(seeds), "max": max(everything),
            "mean": sum(everything) / len(everything), "values": len(everything),
            "within_1_lsb": sum(e <= 1 for e in everything) / len(everything)}


def _online_accuracy(args, config):
    from ga2_sw.analyses.long_context import online_accuracy
    lengths = _accuracy_lengths(args, config)
    rows = online_accuracy(lengths, d=config.d, seeds=args.seeds, chunk=config.sm_max_len,
                           key_digits=args.key_digits)
    keys = "int8 keys" if args.key_digits == 1 else "wide keys (15 bits, two int8 digits)"
    if not args.online:
        print(f"--lengths reach past --max-ctx ({config.max_ctx}), the chapter path's cache: every length is "
              f"measured with the long-context numerics (as --online)")
    print(f"long-context numerics against float attention (docs/LONG_CONTEXT.md): one head, d = {config.d}, {keys}, "
          f"chunks of {config.sm_max_len} tokens, {len(args.seeds)} heads per row; error in output LSBs |out8 - "
          f"out_float / scale_o| and relative to the float output's RMS")
    print(table(["workload", "length", "values", "max LSB", "mean LSB", "rel. RMS"],
                [(r["workload"], r["length"], r["values"], f"{r['max_lsb']:.2f}", f"{r['mean_lsb']:.2f}",
                  f"{100 * r['rms_rel']:.1f}%") for r in rows], aligns=["<"] + [">"] * 5))
    budget = None
    if args.budget:
        from ga2_sw.analyses.long_context import error_budget
        budget = error_budget(lengths, d=config.d, seeds=args.seeds)
        print("\nerror budget: float attention with these approximations only, output LSBs")
        print(table(["workload", "length", "approximations", "max LSB", "mean LSB"],
                    [(r["workload"], r["length"], r["variant"], f"{r['max_lsb']:.2f}", f"{r['mean_lsb']:.2f}")
                     for r in budget], aligns=["<", ">", "<", ">", ">"]))
    if args.json:
        write_json(args.json, {"config": config.to_dict(), "online": True, "key_digits": args.key_digits,
                               "seeds": list(args.seeds), "rows": [{"path": "online", **r} for r in rows],
                               **({"budget": budget} if budget is not None else {})})
    return 0


def _accuracy(args):
    config = config_from_args(args)
    if _long_context(args, config):
        return _online_accuracy(args, config)
    res = accuracy(config, _accuracy_lengths(args, config), args.seeds)
    print("integer decode step against float attention of the unquantised model, error in output LSBs "
          "|out8 - out_float / scale_o| (B = 1 workloads of the invariance check)")
    rows = [(r["L"], r["steps"], r["values"], round(r["max"], 2), round(r["mean"], 2)) for r in res["lengths"]]
    rows.append(("all", sum(r["steps"] for r in res["lengths"]), res["values"], round(res["max"], 2),
                 round(res["mean"], 2)))
    print(table(["length", "steps", "values", "max LSB", "mean LSB"], rows, aligns=[">"] * 5))
    print(f"{100 * res['within_1_lsb']:.1f}% of the values within 1 LSB")
    if args.json:
        # "rows" in the long-context output's shape (one per length), beside the chapter's own keys
        rows = [{"path": "chapter", "workload": "random", "length": r["L"], "steps": r["steps"], "values": r["values"],
                 "max_lsb": round(r["max"], 3), "mean_lsb": round(r["mean"], 3)} for r in res["lengths"]]
        write_json(args.json, {"config": config.to_dict(), "online": False, **res, "rows": rows})
    return 0


# -- mutants -------------------------------------------------------------------------------------------

def _mutants(args):
    if args.timeout is None:
        args.timeout = 900.0
    if args.rtl:
        from sim.rtl_mutants import main_rtl
        return main_rtl(args)
    if args.jobs is None:
        args.jobs = os.cpu_count() or 1
    from ga2_sw import mutants as M
    from ga2_sw.mutation import FAULT
    config = config_from_args(args)
    chosen = M.CHAPTER_MUTANTS if args.chapter_only else M.ALL_MUTANTS
    print("Each mutant deliberately breaks a copy of the batched builder; 'caught' is the expected verdict.")
    start = time.perf_counter()
    rows = M.run_mutants(chosen, config, args.jobs, baseline=True, progress=not args.no_progress)
    elapsed = time.perf_counter() - start
    s = M.summarise(rows)
    print(f"unmutated builder: {'passes the check' if rows[0][1].status == 'survived' else 'FAILS the check'}")
    rows = rows[1:]

    def verdict(o):
        if o.status == "caught":
            return "caught (fault)" if o.detail.startswith(FAULT) else "caught"
        return {"timeout": "caught (timeout)", "survived": "NOT CAUGHT"}.get(o.status, o.status.upper())
    print(table(["mutant", "full check", "no ragged batch"],
                [(m.label + (" (own)" if m.own else ""), verdict(f), verdict(n)) for m, f, n in rows],
                aligns=["<", "<", "<"]))
    print()
    print(f"chapter's mutants: {s['full']} of {s['total']} caught by the full check, {s['no_ragged']} of "
          f"{s['total']} without the ragged batch")
    if s["own"]["total"]:
        print(f"own mutants: {s['own']['full']} of {s['own']['total']} caught by the full check, "
              f"{s['own']['no_ragged']} of {s['own']['total']} without the ragged batch")
    for m, f, n in rows:
        if m.own and not f.caught:
            print(f"- survivor (own) '{m.label}': " + (m.why_survives or "NOT EXPLAINED: a hole in the check"))
    for m, f, n in rows:
        if m.own and f.caught and m.why_survives:
            print(f"- '{m.label}' was expected to survive but was caught")
    print(f"{2 * len(rows) + 1} checks in {elapsed:.1f} s with {args.jobs} jobs")
    for p in s["problems"]:
        print(f"PROBLEM: {p}")
    if args.json:
        write_json(args.json, {"config": config.to_dict(), "seconds": round(elapsed, 1), **s})
    return 1 if s["problems"] else 0
