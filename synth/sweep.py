"""Sweep of square array sizes and execution modes: area (generic and ECP5), Fmax (median over placement seeds)
on the smallest ECP5 that fits with headroom (``MOST_USED``), and the batched decode step's cycles, side by side. Runs on any
``concurrent.futures.Executor`` (``make_executor``: a process pool or a Dask LocalCluster); results are cached
on disk."""

import concurrent.futures as cf
import contextlib
import os

from ga2_sw.config import MODES
from ga2_sw.options import savefig

from . import cache
from .nextpnr import DoesNotFit, ecp5_summary, fits, fmax_seeds
from .units import UNITS
from .workload import decode_step, sweep_config, verilator_check
from .yosys import area, ecp5_netlist

__all__ = ["size_row", "run_sweep", "make_executor", "plot", "ROW_KEYS", "MODES", "MOST_USED", "devices_with_room"]

# A row is placed on the smallest device with at most this share of every resource used. On a nearly full
# device the placer has no room: the 8 x 8 chips use 69 of the LFE5U-45F's 72 multipliers, one per processing
# element, so the array is spread over every DSP column; there the in-order 8 x 8 routed at 77.71 MHz in 623 s
# (seed 1), where on the 85F (69 of 156) it routes at 90.74 MHz in 142 s (docs/SYNTH.md, "sweep").
MOST_USED = 0.9

ROW_KEYS = ["rows", "cols", "mode", "cells", "lut", "dsp", "ff", "bram", "fmax_mhz", "fmax_mhz_min", "fmax_mhz_max",
            "cycles_per_step", "cycles_per_token", "tokens_per_s", "tokens_per_s_per_klut"]


def devices_with_room(total, devices=("25k", "45k", "85k")):
    """The ``devices`` (smallest first) on which the synthesised cells ``total`` leave every resource at most
    ``MOST_USED`` used, and a message for each of the others."""
    room, notes = [], []
    for dev in devices:
        msg = fits(total, dev, most=MOST_USED)
        (notes if msg else room).append(msg or dev)
    return room, notes


def size_row(n, cache_dir=None, seeds=(1,), devices=("25k", "45k", "85k"), do_fmax=True, verify_max=8,
             mode="inorder"):
    """One sweep row for an n x n array in ``mode`` (runs in a worker; everything it computes is cached)."""
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    config = sweep_config(n, mode=mode)
    step = decode_step(config)
    row = {"rows": n, "cols": n, "mode": mode, "cells": None, "lut": None, "dsp": None, "ff": None, "bram": None,
           "fmax_mhz": None, "fmax_mhz_min": None, "fmax_mhz_max": None, "seeds": seeds if do_fmax else [],
           "per_seed": [], "device": None, "critical_path": None, "fit_notes": [], "unit_cells": None}
    gen = area(config, "generic", flat=False, cache_dir=cache_dir)
    net = ecp5_netlist(config, cache_dir)
    row.update(cells=sum(gen["total"].values()), **ecp5_summary(net["total"]))
    row["unit_cells"] = {u: sum(c.values()) for u, c in gen["units"].items()}
    candidates, row["fit_notes"] = devices_with_room(net["total"], devices)
    for dev in candidates if do_fmax else ():
        try:
            r = fmax_seeds(config, dev, seeds=seeds, cache_dir=cache_dir)
        except DoesNotFit as exc:
            row["fit_notes"].append(str(exc))
            continue
        row.update({k: r[k] for k in ("fmax_mhz", "fmax_mhz_min", "fmax_mhz_max", "per_seed", "critical_path",
                                      "utilisation")}, device=dev)
        break
    row.update(cycles_per_step=step["cycles_per_step"], cycles_per_token=step["cycles_per_token"],
               mac_per_cycle=round(step["mac_per_cycle"], 4), pct_of_ceiling=round(step["pct_of_ceiling"], 2),
               macs=step["macs"], words=step["words"])
    tps = None if row["fmax_mhz"] is None else row["fmax_mhz"] * 1e6 / step["cycles_per_token"]
    row["tokens_per_s"] = None if tps is None else round(tps, 1)
    row["tokens_per_s_per_klut"] = None if tps is None else round(tps / (row["lut"] / 1000), 2)
    # The cycle model's figure, checked on the generated Verilog where a build is affordable.
    row["verilator"] = verilator_check(config) if n <= verify_max else None
    row["config"] = config.to_dict()
    return row


@contextlib.contextmanager
def make_executor(kind="process", jobs=1):
    """A ``concurrent.futures.Executor`` of ``jobs`` workers: ``"process"``, a ProcessPoolExecutor; ``"dask"``,
    the executor of a ``distributed.Client`` on a LocalCluster of ``jobs`` single-threaded worker processes
    without a dashboard. Shut down (the cluster closed) on leaving the ``with`` block."""
    if kind == "process":
        with cf.ProcessPoolExecutor(max_workers=jobs) as pool:
            yield pool
        return
    if kind != "dask":
        raise ValueError(f"executor must be process or dask, not {kind!r}")
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ValueError("--executor dask needs the distributed package, which is not installed "
                         "(pip install distributed, or pip install -e '.[synth]')") from None
    # memory_limit=0: no memory-based pausing or restarts (a worker waits for its Yosys and nextpnr processes).
    with LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=0) as cluster, Client(cluster) as client:
        yield client.get_executor()


def run_sweep(sizes, executor=None, jobs=None, cache_dir=None, seeds=(1,), progress=True, do_fmax=True,
              modes=("inorder",), verify_max=8):
    """Rows for every size and mode, sorted by size, then mode in ``modes`` order. ``executor``: any
    concurrent.futures.Executor (a process pool by default, ``jobs`` workers; ``make_executor("dask", jobs)``
    or a Dask ``client.get_executor()`` works too: the task is a plain top-level function of picklable
    arguments). Workers share the on-disk cache, so give them a shared ``cache_dir``."""
    cache_dir = str(cache.cache_dir(cache_dir))
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    modes = list(modes)
    with contextlib.ExitStack() as stack:
        if executor is None:
            executor = stack.enter_context(
                make_executor("process", jobs or min(len(sizes) * len(modes), os.cpu_count() or 1)))
        futures = {executor.submit(size_row, n, cache_dir, seeds, ("25k", "45k", "85k"), do_fmax, verify_max, m):
                   (n, m) for n in sorted(sizes, reverse=True) for m in modes}   # largest first: it takes longest
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=len(futures), desc="synth sweep", unit="row")
        rows = []
        for fut in cf.as_completed(futures):
            rows.append(fut.result())
            if bar:
                n, m = futures[fut]
                bar.set_postfix_str(f"{n}x{n} {m} done")
                bar.update(1)
        if bar:
            bar.close()
    return sorted(rows, key=lambda r: (r["rows"], modes.index(r["mode"])))


MARKERS = {"inorder": "o", "decoupled": "s"}


def _label(r, modes):
    return f"{r['rows']}x{r['cols']}" + (f" {r['mode']}" if len(modes) > 1 else "")


def plot(rows, directory):
    """Three PNGs: area by unit vs size, cycles per token vs size (a line per mode), throughput vs area (Pareto,
    a marker series per mode)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(directory, exist_ok=True)
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    paths = []

    fig, ax = plt.subplots(figsize=(7, 4.5))
    synthesised = [r for r in rows if r["unit_cells"] is not None]
    labels = [_label(r, modes) for r in synthesised]
    bottom = [0] * len(synthesised)
    for unit in UNITS:
        vals = [r["unit_cells"].get(unit, 0) for r in synthesised]
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
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        ax.plot([r["rows"] for r in mine], [r["cycles_per_token"] for r in mine], MARKERS.get(mode, "^") + "-",
                label=mode)
        for r in mine:
            ax.annotate(f"{r['cycles_per_token']:,.0f}", (r["rows"], r["cycles_per_token"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("array size n (n x n, batch B = n)")
    ax.set_ylabel("cycles per token")
    ax.set_title("Batched decode step: cycles per token")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(os.path.join(directory, "cycles_per_token.png"))
    savefig(fig, paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    pts = [(r["lut"], r["tokens_per_s"]) for r in rows if r["tokens_per_s"] is not None]
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode and r["tokens_per_s"] is not None]
        ax.plot([r["lut"] for r in mine], [r["tokens_per_s"] for r in mine], MARKERS.get(mode, "^"),
                linestyle="none", label=mode)
        for r in mine:
            ax.annotate(f"{r['rows']}x{r['cols']} ({r['device']})", (r["lut"], r["tokens_per_s"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=8)
    front, best = [], -1
    for x, y in sorted(pts):
        if y > best:
            front.append((x, y))
            best = y
    if front:
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", linestyle="--", color="grey",
                label="Pareto front")
    ax.legend(fontsize=8)
    missing = [_label(r, modes) for r in rows if r["tokens_per_s"] is None]
    if missing:
        ax.text(0.02, 0.02, "no Fmax: " + ", ".join(missing), transform=ax.transAxes, fontsize=8)
    ax.set_xlabel("ECP5 LUT sites (LUT4 + 2 x CCU2C + 4 x DPR16X4)")
    ax.set_ylabel("tokens/s at the median Fmax over the seeds")
    ax.set_title("Throughput vs area")
    fig.tight_layout()
    paths.append(os.path.join(directory, "throughput_vs_area.png"))
    savefig(fig, paths[-1], dpi=120)
    plt.close(fig)
    return paths
