"""The chip's generated Verilog and its one cache (sim/verilog.py): the text (top module, ports, header with the
configuration and the body's hash, determinism), and a cache key that covers every source file the RTL is made
from, so an edit of e.g. ga2_sw/timing.py can never serve stale Verilog."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.hdl import Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

import sim.verilog as sv
from ga2_hdl.generate import generate_verilog
from ga2_sw.config import FEATURE_FIELDS, WORKLOAD_FIELDS, Config
from sim.testing import verilog_ports

CONFIG = Config(rows=2, cols=2, sp_words=256, ext_words=256, imem_words=32)
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def text():
    return sv.verilog_for(CONFIG)


# -- the text ---------------------------------------------------------------------------------------------

def test_header_names_the_configuration_and_hashes_the_body(text):
    *lines, body = text.split("\n", 5)                      # five comment lines, then Amaranth's output
    assert all(line.startswith("// ") for line in lines)
    assert lines[0].startswith("// GA-2 accelerator, top module `ga2`")
    # the hardware fields, each as to_dict gives it: the workload fields reach no RTL, and a feature switch that
    # is off is left out (the chip has no such hardware, and its Verilog is what it was before the switch existed)
    hardware = {k: v for k, v in CONFIG.to_dict().items()
                if k not in WORKLOAD_FIELDS and not (k in FEATURE_FIELDS and v == 0)}
    assert "st_words" in FEATURE_FIELDS and "st_words" not in hardware
    assert CONFIG.replace(mode="decoupled", bus_bytes=4, st_words=1).hardware()["st_words"] == 1
    assert lines[1] == "// Configuration: " + ", ".join(f"{k}={v}" for k, v in hardware.items())
    sha = re.fullmatch(r"// Body sha256: ([0-9a-f]{64})", lines[4]).group(1)
    assert sha == hashlib.sha256(body.encode()).hexdigest()


def test_generation_is_deterministic_and_the_cache_serves_it(text):
    assert generate_verilog(CONFIG) == text
    assert sv.verilog_for(CONFIG) is text                     # memoised per process


def test_top_module_has_the_chips_ports(text):
    """The ports of the documented interface (docs/ARCHITECTURE.md: host and debug in, external memory out)."""
    from ga2_hdl.ports import DebugSignature, ExtSignature, HostSignature, ext_addr_width, sp_addr_width
    signature = wiring.Signature({"host": In(HostSignature(CONFIG.imem_words)), "debug": In(DebugSignature(sp_addr_width(CONFIG))),
                                  "ext": Out(ExtSignature(ext_addr_width(CONFIG)))})
    expect = {"clk": ("input", 1), "rst": ("input", 1)}
    for path, member in signature.members.flatten():
        if member.is_port:
            expect["__".join(map(str, path))] = ("input" if member.flow == In else "output",
                                                 Shape.cast(member.shape).width)
    ports, order = verilog_ports(text, "ga2")
    assert ports == expect and sorted(order) == sorted(expect)
    assert ports["ext__addr"] == ("output", 8) and ports["host__imem_data"] == ("input", 128)


# -- the key ----------------------------------------------------------------------------------------------

def _labels(files):
    return {f"{f.parent.name}/{f.name}" for f in files}


def test_sources_cover_what_the_rtl_imports():
    labels = _labels(sv.rtl_source_files())
    assert {"ga2_sw/isa.py", "ga2_sw/numerics.py", "ga2_sw/timing.py", "ga2_sw/config.py", "ga2_hdl/top.py",
            "ga2_hdl/generate.py"} <= labels
    assert {"ga2_sw/cli.py", "ga2_sw/machine.py"}.isdisjoint(labels)    # only what the RTL imports


def test_sources_cover_every_module_generation_loads():
    """A fresh process that generates Verilog loads no module of ga2_hdl or ga2_sw outside the key's files."""
    code = ("import json, sys\nfrom ga2_hdl.generate import generate_verilog\nfrom ga2_sw.config import Config\n"
            "generate_verilog(Config(rows=1, cols=1, sp_words=64, ext_words=64, imem_words=8))\n"
            "print(json.dumps(sorted(m.__file__ for n, m in list(sys.modules.items())\n"
            "                        if n.split('.')[0] in ('ga2_hdl', 'ga2_sw'))))")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True)
    loaded = {Path(f).resolve() for f in json.loads(out.stdout)}
    assert loaded and loaded <= set(sv.rtl_source_files())


@pytest.mark.parametrize("name", ["timing.py", "isa.py", "numerics.py", "config.py"])
def test_key_changes_when_a_source_the_rtl_imports_changes(monkeypatch, name):
    before = sv.rtl_sources_key()
    read = sv._read_source

    def edited(path):
        data = read(path)
        return data + b"\n# edited\n" if Path(path).name == name and Path(path).parent.name == "ga2_sw" else data
    monkeypatch.setattr(sv, "_read_source", edited)
    after = sv.rtl_sources_key()
    assert after != before
    assert sv.verilog_key(CONFIG, after) != sv.verilog_key(CONFIG, before)


def _key_in(tree):
    code = "from sim.verilog import rtl_sources_key\nprint(rtl_sources_key())"
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tree,
                          check=True).stdout.strip()


def test_key_of_a_copy_follows_its_timing_py(tmp_path):
    """On a copy of the sources: the same files give the same key (it hashes contents, not places); an edit
    of the copy's ga2_sw/timing.py gives another."""
    for pkg in ("ga2_hdl", "ga2_sw", "sim"):
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    assert _key_in(tmp_path) == sv.rtl_sources_key()
    timing = tmp_path / "ga2_sw" / "timing.py"
    timing.write_text(timing.read_text() + "\n# a comment is an edit too\n")
    assert _key_in(tmp_path) != sv.rtl_sources_key()


# -- the disk cache -----------------------------------------------------------------------------------------

def test_disk_cache_round_trip_and_stale_guard(tmp_path, monkeypatch, text):
    key, _ = sv._sources()
    monkeypatch.setattr(sv, "_SOURCES", (key, True))          # files older than the process
    monkeypatch.setattr(sv, "_MEMO", {})
    assert sv.verilog_for(CONFIG, tmp_path) == text
    stored = tmp_path / "verilog" / f"{sv.verilog_key(CONFIG)}.v"
    assert stored.read_text() == text
    path, sha = sv.verilog_file(CONFIG, tmp_path)
    assert path == stored and sha == hashlib.sha256(text.encode()).hexdigest()

    import ga2_hdl.generate

    def no_generation(config):
        raise AssertionError("generated again instead of read from the disk cache")
    monkeypatch.setattr(ga2_hdl.generate, "generate_verilog", no_generation)
    monkeypatch.setattr(sv, "_MEMO", {})
    assert sv.verilog_for(CONFIG, tmp_path) == text           # from the disk

    # A source edited after the process started: the disk cache is neither read nor written.
    monkeypatch.setattr(sv, "_SOURCES", (key, False))
    monkeypatch.setattr(sv, "_MEMO", {})
    with pytest.raises(AssertionError, match="generated again"):
        sv.verilog_for(CONFIG, tmp_path / "other")
    assert not (tmp_path / "other").exists()
