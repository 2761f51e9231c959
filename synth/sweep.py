"""Sweep of square array sizes: area (generic and ECP5), Fmax on the smallest ECP5 that fits, and the batched
decode step's cycles, side by side. Runs on any ``concurrent.futures.Executor``; results are cached on disk."""

import concurrent.futures as cf
import os

from ga2_sw.options import savefig

from . import cache
from .nextpnr import DEVICES, DoesNotFit, ecp5_summary, fits, fmax
from .units import UNITS
from .workload import decode_step, sweep_config, verilator_check
from .yosys import area, ecp5_netlist

__all__ = ["size_row", "run_sweep", "ROW_KEYS"]

ROW_KEYS = ["rows", "cols", "cells", "lut", "dsp", "ff", "bram", "fmax_mhz", "cycles_per_step", "cycles_per_token",
            "tokens_per_s", "tokens_per_s_per_klut"]


def size_row(n, cache_dir=None, seed=1, devices=("25k", "45k", "85k"), do_fmax=True, verify_max=8):
    """One sweep row for an n x n array (runs in a worker process; everything it computes is cached)."""
    config = sweep_config(n)
    gen = area(config, "generic", flat=False, cache_dir=cache_dir)
    net = ecp5_netlist(config, cache_dir)
    s = ecp5_summary(net["total"])
    step = decode_step(config)
    row = {"rows": n, "cols": n, "cells": sum(gen["total"].values()), **s, "fmax_mhz": None, "device": None,
           "critical_path": None, "fit_notes": []}
    if do_fmax:
        for dev in devices:
            msg = fits(net["total"], dev)
            if msg:
                row["fit_notes"].append(msg)
                continue
            try:
                r = fmax(config, dev, seed=seed, cache_dir=cache_dir)
            except DoesNotFit as exc:
                row["fit_notes"].append(str(exc))
                continue
            row.update(fmax_mhz=r["fmax_mhz"], device=dev, critical_path=r["critical_path"],
                       utilisation=r["utilisation"])
            break
    row.update(cycles_per_step=step["cycles_per_step"], cycles_per_token=step["cycles_per_token"],
               mac_per_cycle=round(step["mac_per_cycle"], 4), pct_of_ceiling=round(step["pct_of_ceiling"], 2),
               macs=step["macs"], words=step["words"])
    tps = None if row["fmax_mhz"] is None else row["fmax_mhz"] * 1e6 / step["cycles_per_token"]
    row["tokens_per_s"] = None if tps is None else round(tps, 1)
    row["tokens_per_s_per_klut"] = None if tps is None else round(tps / (s["lut"] / 1000), 2)
    # The cycle model's figure, checked on the generated Verilog where a build is affordable.
    row["verilator"] = verilator_check(config) if n <= verify_max else None
    row["unit_cells"] = {u: sum(c.values()) for u, c in gen["units"].items()}
    row["config"] = config.to_dict()
    return row


def run_sweep(sizes, executor=None, jobs=None, cache_dir=None, seed=1, progress=True, do_fmax=True):
    """Rows for every size, sorted by size. ``executor``: any concurrent.futures.Executor (a process pool by
    default, ``jobs`` workers; a Dask ``client.get_executor()`` works too: the task is a plain top-level
    function of picklable arguments). Workers share the on-disk cache, so give them a shared ``cache_dir``."""
    cache_dir = str(cache.cache_dir(cache_dir))
    own = executor is None
    if own:
        executor = cf.ProcessPoolExecutor(max_workers=jobs or min(len(sizes), os.cpu_count() or 1))
    try:
        futures = {executor.submit(size_row, n, cache_dir, seed, ("25k", "45k", "85k"), do_fmax): n
                   for n in sorted(sizes, reverse=True)}          # largest first: it takes longest
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=len(futures), desc="synth sweep", unit="size")
        rows = []
        for fut in cf.as_completed(futures):
            rows.append(fut.result())
            if bar:
                bar.set_postfix_str(f"{futures[fut]}x{futures[fut]} done")
                bar.update(1)
        if bar:
            bar.close()
    finally:
        if own:
            executor.shutdown()
    return sorted(rows, key=lambda r: r["rows"])


def plot(rows, directory):
    """Three PNGs: area by unit vs size, cycles per token vs size, throughput vs area (Pareto)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(directory, exist_ok=True)
    labels = [f"{r['rows']}x{r['cols']}" for r in rows]
    paths = []

    fig, ax = plt.subplots(figsize=(7, 4.5))
    bottom = [0] * len(rows)
    for unit in UNITS:
        vals = [r["unit_cells"].get(unit, 0) for r in rows]
        ax.bar(labels, vals, bottom=bottom, label=unit)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("generic Yosys cells")
    ax.set_xlabel("array size")
    ax.set_title("Area by unit (generic gates, hierarchical synthesis)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(os.path.join(directory, "area_by_unit.png"))
    savefig(fig, paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot([r["rows"] for r in rows], [r["cycles_per_token"] for r in rows], "o-")
    for r in rows:
        ax.annotate(f"{r['cycles_per_token']:,.0f}", (r["rows"], r["cycles_per_token"]), textcoords="offset points",
                    xytext=(4, 4), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("array size n (n x n, batch B = n)")
    ax.set_ylabel("cycles per token")
    ax.set_title("Batched decode step: cycles per token")
    fig.tight_layout()
    paths.append(os.path.join(directory, "cycles_per_token.png"))
    savefig(fig, paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    pts = [(r["lut"], r["tokens_per_s"], f"{r['rows']}x{r['cols']} ({r['device']})") for r in rows
           if r["tokens_per_s"] is not None]
    for x, y, lab in pts:
        ax.plot(x, y, "o")
        ax.annotate(lab, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    front, best = [], -1
    for x, y, _ in sorted(pts):
        if y > best:
            front.append((x, y))
            best = y
    if front:
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", linestyle="--", color="grey",
                label="Pareto front")
        ax.legend(fontsize=8)
    unfit = [f"{r['rows']}x{r['cols']}" for r in rows if r["tokens_per_s"] is None]
    if unfit:
        ax.text(0.02, 0.02, "no ECP5 fit: " + ", ".join(unfit), transform=ax.transAxes, fontsize=8)
    ax.set_xlabel("ECP5 LUT sites (LUT4 + 2 x CCU2C + 4 x DPR16X4)")
    ax.set_ylabel("tokens/s at Fmax")
    ax.set_title("Throughput vs area")
    fig.tight_layout()
    paths.append(os.path.join(directory, "throughput_vs_area.png"))
    savefig(fig, paths[-1], dpi=120)
    plt.close(fig)
    return paths
