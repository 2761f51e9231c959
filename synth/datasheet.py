"""A named chip's datasheet, measured by one command and recorded with the hash of the Verilog it describes.

``python -m synth datasheet --chip NAME`` synthesises the chip for the ECP5 (LUT4 sites, FFs, multipliers, block
RAMs), places and routes it on its device with seeds 1, 2 and 3 (``SEEDS``, always those three: a seed that does
not route within the limit is recorded as unrouted, and the chip then has no Fmax), runs the chapter's five
decode steps (d = 16, contexts to 16: ``chapter_workload``) on the cycle model and on Verilator, each checked
against the reference machine, and records it all in ``ga2_sw/datasheets.json`` with the sha256 of
the chip's Verilog and of its body. ``ga2 chips`` lists the records and writes docs/CHIPS.md from them;
``python -m synth figures`` says which records no longer describe today's RTL.
"""

import json
from pathlib import Path

from ga2_sw.chips import DATASHEETS, configuration_changes, load_datasheets

__all__ = ["RECORD", "SEEDS", "DEFAULT_LIMIT", "chapter_workload", "measure", "load_records", "store_record",
           "check_records", "tokens_per_s"]

RECORD = DATASHEETS
SEEDS = (1, 2, 3)
DEFAULT_LIMIT = 3600            # seconds a seed may place and route before it is recorded as unrouted


def chapter_workload(config):
    """``config`` running the chapter's workload: one head of d = d_model = 16, contexts to 16 tokens."""
    return config.replace(d=16, d_model=16, max_ctx=16)


def tokens_per_s(decode, fmax_mhz):
    """Tokens a second of the largest batch of equal contexts among the decode steps, at ``fmax_mhz``: the
    batch's tokens over its step's cycles at that clock (None without an Fmax)."""
    if fmax_mhz is None:
        return None
    step = max((s for s in decode if "ragged" not in s["name"]), key=lambda s: s["batch"])
    return round(step["batch"] * fmax_mhz * 1e6 / step["cycles"], 1)


def _decode(config, sims, progress):
    """The decode steps on each simulator of ``sims``: ``(steps, agreeing)``, the steps as the first simulator
    counted them and the simulators whose every step equals the reference machine's memories and counters."""
    from sim.decode_table import decode_table
    steps, agreeing = None, []
    for sim in sims:
        progress(f"decode steps on {sim}")
        rows, _ = decode_table(config, sim)
        if steps is None:
            steps = [{"name": r["name"], "batch": r["batch"], "cycles": r["cycles"], "beats": r["beats"],
                      "x_bound": round(r["cycles"] / r["memory_bound"], 3)} for r in rows]
        elif [r["cycles"] for r in rows] != [s["cycles"] for s in steps]:
            raise RuntimeError(f"{sim} counted other cycles than {sims[0]}")
        if all(r["matches_reference"] for r in rows):
            agreeing.append(sim)
    return steps, agreeing


def measure(chip, sims=("model", "verilator"), limit=DEFAULT_LIMIT, jobs=1, cache_dir=None, progress=print,
            router=None):
    """The datasheet of catalogue chip ``chip`` (a ``ga2_sw.chips.Chip``): a record for ``datasheets.json``.
    ``router``: nextpnr's router for every seed (default router1, ``synth.nextpnr.ROUTERS``), recorded."""
    from ga2_hdl.generate import body_sha256
    from .nextpnr import ROUTERS, DoesNotFit, ecp5_summary, fmax_seeds
    from .yosys import _verilog, ecp5_netlist
    config, router = chip.config, router or ROUTERS[0]
    path, sha = _verilog(config, cache_dir)
    progress(f"{chip.name}: synthesis for the ECP5")
    total = ecp5_netlist(config, cache_dir)["total"]
    area = ecp5_summary(total)
    progress(f"{chip.name}: placing and routing on {chip.device_name}, seeds {', '.join(map(str, SEEDS))}")
    try:
        r = fmax_seeds(config, chip.device, seeds=SEEDS, cache_dir=cache_dir, jobs=jobs, progress=True,
                       limit=limit, router=router)
        seeds = [{"seed": p["seed"], "fmax_mhz": p["fmax_mhz"], "seconds": p["seconds"],
                  **({"unrouted": p["unrouted"]} if p.get("unrouted") else {})} for p in r["per_seed"]]
        paths = [{"seed": p["seed"], **{k: p["critical_path"][k] for k in ("from", "to", "total_ns", "logic_ns",
                                                                         "routing_ns")}}
                 for p in r["per_seed"] if p["critical_path"]]
        fmax_mhz, fit = r["fmax_mhz"], None
    except DoesNotFit as exc:
        seeds, paths, fmax_mhz, fit = [], [], None, str(exc)
    decode, agreeing = _decode(chapter_workload(config), sims, lambda text: progress(f"{chip.name}: {text}"))
    sheet = {"fmax_mhz": fmax_mhz, "fmax_seeds": seeds, "worst_paths": paths,
             "lut4": total.get("LUT4", 0), "ccu2c": total.get("CCU2C", 0), "lut_sites": area["lut"],
             "ff": area["ff"], "dsp": area["dsp"], "bram": area["bram"],
             "decode_programs": [s["name"] for s in decode], "decode_cycles": [s["cycles"] for s in decode],
             "decode_words": [s["beats"] for s in decode], "decode_x_bound": [s["x_bound"] for s in decode],
             "tokens_per_s": tokens_per_s(decode, fmax_mhz), "simulators": agreeing,
             "verilog_sha256": sha, "verilog_body_sha256": body_sha256(Path(path).read_text()),
             "router": router,
             "command": f"python -m synth datasheet --chip {chip.name}"
                        + (f" --limit {limit}" if limit != DEFAULT_LIMIT else "")
                        + (f" --router {router}" if router != ROUTERS[0] else "")}
    if fit:
        sheet["does_not_fit"] = fit
    return {"name": chip.name, "purpose": chip.purpose, "device": chip.device_name, "config": config.to_dict(),
            "datasheet": sheet}


def load_records(path=RECORD):
    """The recorded datasheets (``ga2_sw.chips.load_datasheets``)."""
    return load_datasheets(path)


def store_record(record, path=RECORD):
    """``record`` into the file at ``path`` (replacing the chip's earlier one), written atomically."""
    from ga2_sw.options import atomic_write
    records = load_records(path)
    records[record["name"]] = record
    text = json.dumps({"chips": dict(sorted(records.items()))}, indent=1) + "\n"
    with atomic_write(path) as f:
        f.write(text)


def check_records(records, cache_dir=None):
    """``{name: True/False}``: whether each record's Verilog body is the one today's RTL generates for the
    catalogue's chip of that name, placed on the chip's device (False also for a chip the catalogue no longer
    has or has changed, and for a record of another device)."""
    from ga2_hdl.generate import body_sha256
    from ga2_sw.chips import CATALOGUE
    from .yosys import _verilog
    out = {}
    for name, record in records.items():
        chip = CATALOGUE.get(name)
        if chip is None or record.get("device") != chip.device_name \
                or configuration_changes(record["config"], chip.config):
            out[name] = False
            continue
        path, _ = _verilog(chip.config, cache_dir)
        out[name] = body_sha256(Path(path).read_text()) == record["datasheet"]["verilog_body_sha256"]
    return out
