"""Plain-text tables for the synth commands."""

import re

from .units import UNITS

__all__ = ["table", "area_table", "fmax_text", "sweep_table", "datasheet_text", "lut_sites_by_signal",
           "signals_table"]


def table(head, body, align=None):
    cols = list(zip(*([head] + body))) if body else [[h] for h in head]
    widths = [max(len(str(x)) for x in c) for c in cols]
    align = align or ["<"] + [">"] * (len(head) - 1)
    fmt = lambda row: "  ".join(f"{str(x):{a}{w}}" for x, a, w in zip(row, align, widths))
    return "\n".join([fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in body])


def area_table(result):
    units = [u for u in UNITS if u in result["units"]] + [u for u in result["units"] if u not in UNITS]
    cells = sorted(result["total"], key=lambda c: -result["total"][c])
    body = [[c] + [f"{result['units'][u].get(c, 0):,}" for u in units] + [f"{result['total'][c]:,}"] for c in cells]
    body.append(["all cells"] + [f"{sum(result['units'][u].values()):,}" for u in units]
                + [f"{sum(result['total'].values()):,}"])
    out = table(["cell"] + units + ["total"], body)
    if "flat_total" in result:
        flat = result["flat_total"]
        out += (f"\nflattened synthesis: {sum(flat.values()):,} cells ("
                + ", ".join(f"{k} {v:,}" for k, v in sorted(flat.items(), key=lambda kv: -kv[1])) + ")")
    if "coarse_units" in result:
        muls = {u: c.get("$mul", 0) for u, c in result["coarse_units"].items() if c.get("$mul")}
        out += "\nword-level $mul cells before gate mapping: " + ", ".join(f"{u} {n}" for u, n in muls.items())
    return out


# The logic cells of an ECP5 netlist and the LUT sites (nextpnr's TRELLIS_COMB) each takes: a CCU2C two, a
# 16 x 4 LUT RAM four.
LUT_SITES = {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 4}


def lut_sites_by_signal(netlist, top=20):
    """The ``top`` signals of a flattened ECP5 ``netlist`` (Yosys' JSON, a dict) by the LUT sites of the cells
    that drive them: Yosys names a mapped cell after the signal it drives (``scratchpad.b7_row_LUT4_Z_3``), so
    with the cell suffix dropped and every number written ``#`` (a bank's, a lane's, an operand's) the cells
    group by the RTL signal they build. Returns [(signal, LUT sites)], the largest first, and the total."""
    groups, total = {}, 0
    for module in netlist["modules"].values():
        for name, cell in module.get("cells", {}).items():
            sites = LUT_SITES.get(cell["type"])
            if not sites:
                continue
            total += sites
            signal = re.sub(r"\d+", "#", cell_signal(name))
            groups[signal] = groups.get(signal, 0) + sites
    return sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))[:top], total


def signals_table(groups, total):
    body = [[signal, f"{n:,}", f"{100 * n / total:.1f}%"] for signal, n in groups]
    return table(["signal (cells named after what they drive)", "LUT sites", "share"], body)


def _path_line(cp):
    return (f"{cp['from']} -> {cp['to']}: {cp['total_ns']} ns "
            f"({cp['logic_ns']} ns logic incl. clk-to-q, {cp['routing_ns']} ns routing)")


def fmax_text(r):
    """nextpnr's result: Fmax (with several seeds: each seed's and the median), utilisation, critical path."""
    per_seed = r.get("per_seed") or []
    router = f", nextpnr {r['router']}" if r.get("router", "router1") != "router1" else ""
    unrouted = r.get("unrouted") or []
    if len(per_seed) > 1:
        seeds = ", ".join(str(s) for s in r["seeds"])
        head = (f"no Fmax: of seeds {seeds}, {'seeds' if len(unrouted) > 1 else 'seed'} "
                f"{', '.join(map(str, unrouted))} did not route" if unrouted else
                f"Fmax {r['fmax_mhz']} MHz, the median of seeds {seeds}")
        lines = [f"LFE5U-{r['device'].upper()}: {head}"
                 + f" (routed: min {r['fmax_mhz_min']}, max {r['fmax_mhz_max']}; target {r['target_mhz']} MHz{router})"]
        lines += [f"  seed {p['seed']}: " + (f"unrouted, {p['unrouted']}" if p.get("unrouted") else
                                              f"{p['fmax_mhz']} MHz")
                  + (f", critical path {_path_line(p['critical_path'])}" if p["critical_path"] else "")
                  for p in per_seed]
    else:
        why = per_seed[0]["unrouted"] if per_seed else r.get("unrouted")
        lines = [f"LFE5U-{r['device'].upper()}: " + (f"unrouted, {why}" if why else f"Fmax {r['fmax_mhz']} MHz")
                 + f" (target {r['target_mhz']} MHz, seed {r['seed']}{router})"]
    lines.append(table(["resource", "used", "available", "%"],
                       [[k, f"{u:,}", f"{a:,}", f"{100 * u / a:.0f}%"] for k, (u, a) in r["utilisation"].items()]))
    cp = r["critical_path"]
    if cp:
        which = f" (seed {r['seed']}, the median)" if len(per_seed) > 1 else ""
        lines.append(f"critical path{which}: {_path_line(cp)}")
        lines.append("  through (RTL signals): " + " -> ".join(path_signals(cp["cells"])))
    return "\n".join(lines)


def cell_signal(cell):
    """The RTL signal an ECP5 cell implements, from the name Yosys gives it after the signal it drives:
    ``sequencer.$83_CCU2C_S1_4$CCU2_COMB0`` -> ``sequencer.$83`` (``$N`` names are in the generated Verilog)."""
    return re.sub(r"(_CCU2C|\$CCU2|_LUT4|_MULT18X18D|_TRELLIS_FF|_TRELLIS_DPR16X4|_PFUMX|_L6MUX21|_DP16KD).*$", "",
                  cell)


def path_signals(cells):
    """The critical path's cells reduced to the RTL signal names they implement (``cell_signal``), consecutive
    repeats merged."""
    out = []
    for c in cells:
        name = cell_signal(c)
        if not out or out[-1] != name:
            out.append(name)
    return out


def _verified(v):
    """The cycles checked on the generated Verilog: 'yes', 'NO', or '--' when not run."""
    if not v:
        return "--"
    return "yes" if v["matches"] else "NO"


def sweep_table(rows):
    """A line per size and mode; notes below for the fit messages and the configurations not synthesised."""
    def f(x, spec=","):
        return "--" if x is None else format(x, spec)
    seeds = sorted({tuple(r["seeds"]) for r in rows if r.get("seeds") and r["fmax_mhz"] is not None})
    body = [[f"{r['rows']}x{r['cols']}", r["mode"], f(r["cells"]), f(r["lut"]), f(r["dsp"]), f(r["ff"]),
             f(r["bram"]), f(r["fmax_mhz"], ".1f"), r.get("device") or "--",
             f(r["cycles_per_step"]), f(r["cycles_per_token"], ",.0f"), f(r["mac_per_cycle"], ".3f"),
             f(r["pct_of_ceiling"], ".1f") + "%", f(r["tokens_per_s"], ",.0f"), f(r["tokens_per_s_per_klut"], ",.1f"),
             _verified(r.get("verilator"))] for r in rows]
    out = table(["size", "mode", "cells", "LUT", "DSP", "FF", "BRAM", "Fmax MHz", "device", "cycles/step",
                 "cycles/token", "MAC/cycle", "of ceiling", "tokens/s", "tok/s/kLUT", "Verilator"], body,
                ["<", "<"] + [">"] * 14)
    notes = [f"Fmax: the median over seeds {', '.join(map(str, s))}" for s in seeds if len(s) > 1]
    notes += [f"{r['rows']}x{r['cols']} {r['mode']}: " + "; ".join(r["fit_notes"]) for r in rows if r.get("fit_notes")]
    return out + ("\n" + "\n".join(notes) if notes else "")


def datasheet_text(record):
    """A chip's recorded datasheet for people: what it is, area, each seed's Fmax, the decode steps."""
    d = record["datasheet"]
    seeds = ", ".join(f"seed {s['seed']} " + (f"{s['fmax_mhz']} MHz" if s["fmax_mhz"] is not None else "unrouted")
                      for s in d["fmax_seeds"]) or d.get("does_not_fit", "not placed")
    router = f", nextpnr {d['router']}" if d.get("router", "router1") != "router1" else ""
    fmax = (f"{d['fmax_mhz']} MHz (median of {seeds}{router})" if d["fmax_mhz"] is not None
            else f"none ({seeds}{router})")
    lines = [f"{record['name']}: {record['purpose']}",
             f"  {record['device']}: LUT4 {d['lut4']:,} and CCU2C {d['ccu2c']:,} ({d['lut_sites']:,} LUT sites), FF "
             f"{d['ff']:,}, multipliers {d['dsp']}, block RAM {d['bram']}",
             f"  Fmax {fmax}"]
    lines += [f"  worst path, seed {p['seed']}: {p['from']} -> {p['to']}, {p['total_ns']} ns ({p['logic_ns']} logic, "
              f"{p['routing_ns']} routing)" for p in d["worst_paths"]]
    lines.append(table(["decode step", "cycles", "words or beats", "x bound"],
                       [[n, f"{c:,}", f"{w:,}", f"{x:.3f}"] for n, c, w, x in
                        zip(d["decode_programs"], d["decode_cycles"], d["decode_words"], d["decode_x_bound"])]))
    tps = f"{d['tokens_per_s']:,} tokens/s at the median Fmax" if d["tokens_per_s"] is not None else "no tokens/s (no Fmax)"
    lines.append(f"  {tps}; simulators that agree with the model: {', '.join(d['simulators'])}")
    return "\n".join(lines)
