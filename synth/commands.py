"""``ga2 chips``: the catalogue of named chips (``ga2_sw.chips``), each with its recorded datasheet
(``ga2_sw/datasheets.json``, measured by ``python -m synth datasheet --chip NAME``) and whether that datasheet
still describes today's RTL; ``--markdown`` writes docs/CHIPS.md from the records."""

import sys

from ga2_sw.chips import configuration_changes
from ga2_sw.options import InputFile, OutputFile, atomic_write

from .datasheet import RECORD, SEEDS, check_records, load_records

__all__ = ["register", "catalogue_rows", "chips_markdown", "summary_markdown", "readme_with_table", "README_BEGIN",
           "README_END"]


def catalogue_rows(records, current):
    """One entry per catalogue chip, as ``ga2 chips --json`` gives it: name, purpose, device, configuration and
    the datasheet (None where none is recorded), with ``current``."""
    from ga2_sw.chips import CATALOGUE
    rows = []
    for chip in CATALOGUE.values():
        record = records.get(chip.name)
        sheet = None
        if record is not None:
            changed = configuration_changes(record["config"], chip.config)
            sheet = {**record["datasheet"], "current": current.get(chip.name, False) and not changed,
                     "configuration_changes": changed}
        rows.append({**chip.to_dict(), "datasheet": sheet})
    return rows


def _changes(sheet):
    return ", ".join(f"{k}={a} then, {b} now" for k, (a, b) in sheet["configuration_changes"].items())


def _mhz(sheet):
    if sheet is None:
        return "not measured"
    if sheet.get("does_not_fit"):
        return "does not fit"
    if sheet["fmax_mhz"] is None:
        unrouted = [str(s["seed"]) for s in sheet["fmax_seeds"] if s["fmax_mhz"] is None]
        return f"none: seed{'s' if len(unrouted) > 1 else ''} {', '.join(unrouted)} unrouted"
    return f"{sheet['fmax_mhz']:.2f}"


def _b4_step(programs):
    """(index, batch) of the B = 4 step among a datasheet's decode ``programs`` ("B=4 (all at token 16)", ...), or
    of its largest batch of equal contexts on a chip of fewer rows."""
    equal = [(int(n[2:n.index(" ")]), i) for i, n in enumerate(programs) if "ragged" not in n]
    batch, index = next(((b, i) for b, i in equal if b == 4), max(equal))
    return index, batch


def _summary(rows, current=True):
    """(header, body) of the catalogue table; ``current``: with the column that says whether each datasheet
    describes today's RTL."""
    head = ["chip", "device", "LUT4", "FF", "DSP", "BRAM", "Fmax MHz", "B=4 step cycles", "x bound", "tokens/s"]
    head += ["current"] * current
    body = []
    for r in rows:
        s = r["datasheet"]
        if s is None:
            body.append([r["name"], r["device"]] + ["-"] * 4 + ["not measured", "-", "-", "-"] + ["-"] * current)
            continue
        step, batch = _b4_step(s["decode_programs"])
        name = r["name"] + (" (earlier configuration)" if s.get("configuration_changes") else "")
        body.append([name, r["device"], f"{s['lut4']:,}", f"{s['ff']:,}", s["dsp"], s["bram"], _mhz(s),
                     f"{s['decode_cycles'][step]:,}" + (f" (B={batch})" if batch != 4 else ""),
                     f"{s['decode_x_bound'][step]:.3f}",
                     f"{s['tokens_per_s']:,.0f}" if s["tokens_per_s"] is not None else "-"]
                    + ["yes" if s["current"] else "NO: measure again"] * current)
    return head, body


README_BEGIN = "<!-- the chips' datasheets: ga2 chips --readme README.md writes this table -->"
README_END = "<!-- end of the chips' datasheets -->"


def summary_markdown(rows):
    """The catalogue's datasheets as a Markdown table (docs/CHIPS.md's and README's)."""
    head, body = _summary(rows, current=False)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|"]
    lines += ["| " + " | ".join([f"`{r[0]}`"] + [str(x) for x in r[1:]]) + " |" for r in body]
    return "\n".join(lines)


def readme_with_table(text, rows):
    """README's text with the block between ``README_BEGIN`` and ``README_END`` made from the records;
    ValueError when the markers are missing."""
    try:
        head, rest = text.split(README_BEGIN + "\n", 1)
        _, tail = rest.split(README_END, 1)
    except ValueError:
        raise ValueError(f"the README has no block between {README_BEGIN!r} and {README_END!r}") from None
    return head + README_BEGIN + "\n" + summary_markdown(rows) + "\n" + README_END + tail


def chips_markdown(rows):
    """docs/CHIPS.md: the catalogue and every recorded datasheet, made from the records alone (whether each is
    still today's RTL is for ``ga2 chips`` and ``python -m synth figures`` to say, not the page)."""
    out = ["# The chips", "",
           "GA-2's named chips (`ga2_sw/chips.py`): every command builds one with `--chip NAME` (default `decoupled`),",
           "and an option beside it changes one field. This page is generated from `ga2_sw/datasheets.json` by",
           "`ga2 chips --markdown docs/CHIPS.md`; each datasheet is measured by `python -m synth datasheet --chip NAME`:",
           f"area from Yosys' `synth_ecp5`, Fmax the median of nextpnr-ecp5's placement seeds {', '.join(map(str, SEEDS))} (a seed",
           "that does not route within the command's limit is recorded as unrouted, and the chip then has no Fmax), the",
           "chapter's five decode steps (one head, d = 16, contexts to 16) on the cycle model and Verilator, and tokens a",
           "second of the largest equal-context batch at the median Fmax. Each record names the sha256 of the Verilog",
           "it measured; `ga2 chips` and `python -m synth figures` say whether that is still today's.", "",
           "| chip | derived from | device | purpose |", "|---|---|---|---|"]
    out += [f"| `{r['name']}` | {('`' + r['base'] + '`') if r['base'] else '-'} | {r['device']} | {r['purpose']} |"
            for r in rows]
    out += ["", summary_markdown(rows)]
    for r in rows:
        s = r["datasheet"]
        out += ["", f"## `{r['name']}`", "", r["purpose"] + ".", ""]
        out.append("Configuration: " + ", ".join(f"`{k}={v}`" for k, v in r["config"].items()) + ".")
        if s is None:
            out += ["", f"No datasheet recorded yet: `python -m synth datasheet --chip {r['name']}`."]
            continue
        out += ["", f"Measured by `{s['command']}` on the Verilog of sha256 `{s['verilog_sha256'][:16]}...`.", ""]
        if s.get("configuration_changes"):
            out += [f"**Measured on an earlier configuration of this chip** ({_changes(s)}): the figures below are "
                    f"that chip's until `python -m synth datasheet --chip {r['name']}` measures this one.", ""]
        out.append(f"* {r['device']} (flattened `synth_ecp5`): LUT4 {s['lut4']:,} and CCU2C {s['ccu2c']:,} "
                   f"({s['lut_sites']:,} LUT sites), FF {s['ff']:,}, multipliers {s['dsp']}, block RAMs {s['bram']}.")
        if s.get("does_not_fit"):
            out.append(f"* Not placed: {s['does_not_fit']}.")
        else:
            seeds = "; ".join(f"seed {x['seed']}: " + (f"{x['fmax_mhz']} MHz ({x['seconds']:,.0f} s)"
                                                       if x["fmax_mhz"] is not None else f"unrouted ({x['unrouted']})")
                              for x in s["fmax_seeds"])
            out.append(f"* Fmax: {_mhz(s)}{' MHz' if s['fmax_mhz'] is not None else ''} ({seeds}).")
            out += [f"* Worst path of seed {p['seed']}: `{p['from']}` -> `{p['to']}`, {p['total_ns']} ns "
                    f"({p['logic_ns']} logic, {p['routing_ns']} routing)." for p in s["worst_paths"]]
        out += ["", "| decode step | cycles | words or beats | x memory bound |", "|---|---:|---:|---:|"]
        out += [f"| {n} | {c:,} | {w:,} | {x:.3f} |" for n, c, w, x in
                zip(s["decode_programs"], s["decode_cycles"], s["decode_words"], s["decode_x_bound"])]
        tps = f"{s['tokens_per_s']:,} tokens/s" if s["tokens_per_s"] is not None else "no tokens/s (no Fmax)"
        out += ["", f"{tps}; the simulators that agree with the reference machine on every step: "
                    f"{', '.join(s['simulators'])}."]
    return "\n".join(out) + "\n"


def _run(args):
    from ga2_sw.analyses.common import write_json
    from .report import table
    records = load_records(args.record)
    current = {} if args.no_check else check_records(records)
    rows = catalogue_rows(records, current)
    if args.markdown:
        with atomic_write(args.markdown) as f:
            f.write(chips_markdown(rows))
    if args.readme:
        text = readme_with_table(open(args.readme).read(), rows)
        with atomic_write(args.readme) as f:
            f.write(text)
    head, body = _summary(rows, current=not args.no_check)
    for r in rows:
        print(f"{r['name']:10} {r['device']}  {r['purpose']}")
    print()
    print(table(head, body))
    if args.json:
        write_json(args.json, {"chips": rows})
    stale = [r["name"] for r in rows if r["datasheet"] is not None and not r["datasheet"]["current"]]
    if stale and not args.no_check:
        print(f"{len(stale)} datasheets describe other Verilog or another device than the catalogue's: "
              f"{', '.join(stale)} (python -m synth datasheet --chip NAME)", file=sys.stderr)
    return 0


def _has_table(path):
    readme_with_table(open(path).read(), [])


def register(sub):
    p = sub.add_parser("chips", help="the named chips, each with its datasheet (area, Fmax, decode steps, tokens/s)")
    p.add_argument("--json", metavar="FILE", type=OutputFile(suffixes=(".json",)),
                   help="write the catalogue and the datasheets as JSON")
    p.add_argument("--markdown", metavar="FILE", type=OutputFile(suffixes=(".md",)),
                   help="write the catalogue page (docs/CHIPS.md) from the records")
    p.add_argument("--readme", metavar="FILE", type=InputFile(decode=_has_table),
                   help="rewrite the datasheets' table of this README (its block between the markers) from the records")
    p.add_argument("--record", metavar="FILE", default=str(RECORD), type=InputFile(decode=load_records),
                   help="the recorded datasheets (default ga2_sw/datasheets.json)")
    p.add_argument("--no-check", action="store_true",
                   help="do not regenerate each chip's Verilog to say whether its datasheet is current")
    p.set_defaults(func=_run)
