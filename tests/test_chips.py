"""The catalogue of named chips: each chip what its derivation says, the command line and the Python API giving the
same chip for the same request, the hardware alone deciding the Verilog, the datasheets' Fmax rule (seeds 1, 2
and 3; an unrouted seed leaves the chip without an Fmax) and docs/CHIPS.md made from the records."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ga2_sw.chips import CATALOGUE, CHIP_NAMES, DEFAULT_CHIP, chip, config_of, name_of
from ga2_cli import build_parser, main
from ga2_sw.cli import config_from_args
from ga2_sw.config import WORKLOAD_FIELDS, Config

ROOT = Path(__file__).resolve().parent.parent


def test_the_catalogue_has_the_named_chips_each_placed_on_a_device():
    from synth.nextpnr import DEVICES
    assert {"chapter", "decoupled", "fast", "axi", "long", "llm"} <= set(CHIP_NAMES)
    assert DEFAULT_CHIP in CHIP_NAMES
    for c in CATALOGUE.values():
        assert c.device in DEVICES and c.purpose and c.device_name.startswith("LFE5U-")
        assert c.base is None or c.base in CATALOGUE


def test_the_chips_are_the_configurations_spelled_by_hand():
    """Independent of the derivations: each chip as its fields would be written out in full."""
    assert chip("chapter").config == Config()
    assert chip("decoupled").config == Config(mode="decoupled")
    assert chip("fast").config == Config(mode="decoupled", bus_bytes=4, row_writes=1, rq_overlap=1, ld_overlap=1,
                                         row_b=1, rq_lanes=2, sm_lanes=2)
    assert chip("axi").config == Config(mode="decoupled", bus_bytes=4, axi=1, memory="ddr3-1600")
    assert chip("long").config == Config(mode="decoupled", online_unit=1, sp_words=32768, imem_words=4096,
                                         ext_words=131072, d=64, d_model=256, max_ctx=4096)
    assert chip("chapter2").config == Config(rows=2, cols=2)
    assert chip("chapter8").config == Config(rows=8, cols=8, sp_words=8192, ext_words=16384)
    assert chip("decoupled8").config == Config(mode="decoupled", rows=8, cols=8, sp_words=8192, ext_words=16384)


@pytest.mark.parametrize("name", CHIP_NAMES)
def test_a_derived_chip_differs_from_its_base_only_where_it_says(name):
    c = chip(name)
    if c.base is None:
        return
    base = chip(c.base).config.to_dict()
    changed = {k for k, v in c.config.to_dict().items() if base[k] != v}
    assert changed, f"{name} is its base {c.base}"


def _args(argv):
    return build_parser().parse_args(argv)


@pytest.mark.parametrize("name", CHIP_NAMES)
def test_the_command_line_builds_the_api_s_chip(name):
    for command in (["decode-table"], ["generate", "-o", "x.v"], ["fuzz"], ["traffic"]):
        assert config_from_args(_args(command + ["--chip", name])) == config_of(name)
    assert config_from_args(_args(["traffic", "--chip", name, "--sp-words", "8192"])) == \
        config_of(name, sp_words=8192)


def test_without_chip_every_command_builds_the_default_chip():
    for command in (["decode-table"], ["generate", "-o", "x.v"], ["fuzz"], ["check-batching"], ["prefill"]):
        assert config_from_args(_args(command)) == config_of(DEFAULT_CHIP), command
    assert config_from_args(_args(["traffic", "--mode", "inorder"])) == chip("chapter").config


def test_the_command_line_defaults_no_field_the_api_does_not():
    """A DRAM needs the AXI4 port and a long context the online unit, on the command line as in Config."""
    with pytest.raises(ValueError, match="axi"):
        config_from_args(_args(["traffic", "--memory", "ddr3-800"]))
    with pytest.raises(ValueError, match="sm_max_len"):
        config_from_args(_args(["traffic", "--max-ctx", "4096"]))
    assert config_from_args(_args(["traffic", "--chip", "long"])).online_unit == 1


def test_an_unknown_chip_is_one_line(capsys):
    assert main(["decode-table", "--chip", "fastest"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Unknown chip 'fastest'" in err[0] and "chapter" in err[0]
    with pytest.raises(ValueError, match="^Unknown chip 'fastest'; known: chapter, decoupled"):
        chip("fastest")


def test_the_chips_of_the_other_two_command_lines():
    from ga2_hdl.commands import build_parser as hdl_parser
    from synth.__main__ import build_parser as synth_parser
    assert config_from_args(hdl_parser().parse_args(["generate", "--chip", "fast", "-o", "x.v"])) == chip("fast").config
    assert config_from_args(synth_parser().parse_args(["area", "--chip", "axi", "--rows", "2"])) == \
        config_of("axi", rows=2)


def test_name_of_knows_a_chip_by_its_hardware():
    assert name_of(Config()) == "chapter"
    assert name_of(chip("long").config.replace(d=16, max_ctx=16)) == "long"
    assert name_of(Config(rows=3)) is None


def test_the_hardware_alone_decides_the_verilog():
    from ga2_hdl.generate import generate_verilog
    base = Config()
    workload = base.replace(d=8, d_model=24, max_ctx=8, clock_mhz=50, ext_write_latency=3)
    assert set(WORKLOAD_FIELDS) <= set(base.to_dict()) and base.hardware() == workload.hardware()
    text = generate_verilog(base)
    assert generate_verilog(workload) == text
    header = text.split("\n", 2)[1]
    assert "rows=4" in header and not any(f"{k}=" in header for k in WORKLOAD_FIELDS)


# -- datasheets ----------------------------------------------------------------------------------------------

def _run(seed, mhz, unrouted=None):
    return {"seed": seed, "fmax_mhz": mhz, "critical_path": None, "fmax_line": None, "seconds": 1.0,
            **({"unrouted": unrouted} if unrouted else {})}


def test_the_fmax_is_the_median_of_three_routed_seeds_or_none():
    from synth.nextpnr import median_of_seeds
    r = median_of_seeds([_run(1, 101.0), _run(2, 97.5), _run(3, 104.2)])
    assert r["fmax_mhz"] == 101.0 and r["unrouted"] == [] and r["seed"] == 1
    r = median_of_seeds([_run(1, 101.0), _run(2, None, "stopped after 60 s"), _run(3, 104.2)])
    assert r["fmax_mhz"] is None and r["unrouted"] == [2]
    assert (r["fmax_mhz_min"], r["fmax_mhz_max"]) == (101.0, 104.2)


def test_a_place_and_route_past_its_limit_stops_with_where_it_was(tmp_path):
    import time
    from synth.nextpnr import OutOfTime, run_with_progress
    (tmp_path / "log").write_text("Info: Routing 1234 arcs\n")
    t0 = time.perf_counter()
    with pytest.raises(OutOfTime, match="routing 1,234 arcs"):    # the limit counts CPU time: a busy loop
        run_with_progress([sys.executable, "-c", "while True: pass"], tmp_path, "log", poll=0.05, limit=0.5)
    assert time.perf_counter() - t0 < 20
    assert run_with_progress([sys.executable, "-c", "import time; time.sleep(1.5)"], tmp_path, "log", poll=0.05,
                             limit=0.5)[0] == 0                     # asleep, it uses none


def test_a_seed_routed_past_the_limit_is_unrouted_under_it(tmp_path, monkeypatch):
    """A seed routed by `synth fmax` (no limit) after more CPU time than a datasheet's limit allows is unrouted
    under that limit, read from the cache without placing it again; within the limit it is the routed result.
    nextpnr is stood in for by a process that burns CPU and writes its report."""
    import json
    import synth.nextpnr as nextpnr
    monkeypatch.setattr(nextpnr, "ecp5_netlist", lambda config, cache_dir=None: {
        "json": str(tmp_path / "net.json"), "total": {}, "flow": "stand-in"})
    monkeypatch.setattr(nextpnr, "pinned_netlist", lambda src, dst, top="ga2": None)
    burn = ("import json, time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n"
            "json.dump({'fmax': {'clk': {'achieved': 90.0}}, 'utilization': {}}, open('report.json', 'w'))\n")
    monkeypatch.setattr(nextpnr.shutil, "which", lambda name: None)
    runs = []

    def stand_in(cmd, cwd, log, progress=None, limit=None):
        runs.append(limit)
        return nextpnr.subprocess.run([sys.executable, "-c", burn], cwd=cwd).returncode, ""
    monkeypatch.setattr(nextpnr, "run_with_progress", stand_in)
    config = chip("chapter").config
    routed = nextpnr.fmax(config, "25k", seed=1, cache_dir=tmp_path, precheck=False)
    assert routed["fmax_mhz"] == 90.0 and routed["cpu_seconds"] >= 0.9 and runs == [None]
    late = nextpnr.fmax(config, "25k", seed=1, cache_dir=tmp_path, precheck=False, limit=0.5)
    assert late["fmax_mhz"] is None and "routed only after 1 s of CPU time (limit 0.5 s)" in late["unrouted"]
    assert runs == [None]                                       # from the cache, not placed again
    assert nextpnr.fmax(config, "25k", seed=1, cache_dir=tmp_path, precheck=False, limit=60)["fmax_mhz"] == 90.0
    assert nextpnr.median_of_seeds([routed, late, routed])["fmax_mhz"] is None


def test_the_catalogue_table_quotes_the_b4_step_or_the_largest_batch():
    """The table of datasheets quotes each chip's B = 4 step, and on a chip of fewer rows its largest batch (a
    2 x 2 array's decode steps stop at B = 2)."""
    from synth.commands import _b4_step
    eight = [f"B={b} (all at token 16)" for b in range(1, 9)] + ["B=8 ragged (3, 9, 1, 14, 6, 12, 2, 16)"]
    assert _b4_step(eight) == (3, 4)
    assert _b4_step(["B=1 (all at token 16)", "B=2 (all at token 16)", "B=2 ragged (3, 9)"]) == (1, 2)


def test_tokens_per_s_is_the_largest_batch_over_its_step():
    from synth.datasheet import tokens_per_s
    steps = [{"name": "B=1 (all at token 16)", "batch": 1, "cycles": 1000},
             {"name": "B=4 (all at token 16)", "batch": 4, "cycles": 3000},
             {"name": "B=4 ragged (3, 9, 1, 14)", "batch": 4, "cycles": 2000}]
    assert tokens_per_s(steps, 100.0) == pytest.approx(4 * 100e6 / 3000, abs=0.1)
    assert tokens_per_s(steps, None) is None


def test_docs_chips_md_and_the_readme_s_table_are_made_from_the_records():
    from synth.commands import catalogue_rows, chips_markdown, readme_with_table
    from ga2_sw.chips import configuration_changes
    from synth.datasheet import load_records
    records = load_records()
    rows = catalogue_rows(records, {})
    assert (ROOT / "docs" / "CHIPS.md").read_text() == chips_markdown(rows), \
        "docs/CHIPS.md is not the records' page: ga2 chips --markdown docs/CHIPS.md"
    readme = (ROOT / "README.md").read_text()
    assert readme_with_table(readme, rows) == readme, "README's table is not the records': ga2 chips --readme README.md"
    for name, record in records.items():
        sheet = record["datasheet"]
        # a record of an earlier configuration of the chip says so on the page, field by field
        changed = configuration_changes(record["config"], chip(name).config)
        assert (Config.from_dict(record["config"]) == chip(name).config) == (not changed)
        section = (ROOT / "docs" / "CHIPS.md").read_text().split(f"## `{name}`")[1].split("\n## ")[0]
        assert all(f"{k}={a} then, {b} now" in section for k, (a, b) in changed.items())
        assert ("earlier configuration" in section) == bool(changed)
        assert [s["seed"] for s in sheet["fmax_seeds"]] in ([1, 2, 3], [])
        routed = [s["fmax_mhz"] for s in sheet["fmax_seeds"] if s["fmax_mhz"] is not None]
        if len(routed) == 3:
            assert sheet["fmax_mhz"] == sorted(routed)[1]
        else:
            assert sheet["fmax_mhz"] is None


def test_ga2_chips_json(tmp_path):
    out = tmp_path / "c.json"
    r = subprocess.run([sys.executable, "-m", "ga2_cli", "chips", "--no-check", "--json", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    chips = json.loads(out.read_text())["chips"]
    assert [c["name"] for c in chips] == list(CHIP_NAMES)
    assert all({"name", "purpose", "device", "config", "datasheet"} <= set(c) for c in chips)


@pytest.mark.parametrize("name", CHIP_NAMES)
def test_every_chip_runs_the_chapter_s_decode_steps_on_the_model(name):
    from sim.decode_table import decode_table, table_runs
    from synth.datasheet import chapter_workload
    config, ticks = chapter_workload(chip(name).config), []
    rows, _ = decode_table(config, "model", progress=lambda: ticks.append(1))
    assert len(rows) == chip(name).config.rows + 1 and all(r["matches_reference"] for r in rows)
    assert len(ticks) == table_runs(config) == 3 * len(rows)         # the progress bar's length is its runs'


def test_a_datasheet_is_current_only_on_its_chip_s_verilog_and_device(tmp_path):
    from ga2_hdl.generate import body_sha256
    from synth.datasheet import check_records
    from synth.yosys import _verilog
    config = chip("chapter").config
    path, _ = _verilog(config, tmp_path)
    record = {"config": config.to_dict(), "device": "LFE5U-25F",
              "datasheet": {"verilog_body_sha256": body_sha256(Path(path).read_text())}}
    assert check_records({"chapter": record}, cache_dir=tmp_path) == {"chapter": True}
    other = {**record, "datasheet": {"verilog_body_sha256": "0" * 64}}
    assert check_records({"chapter": other}, cache_dir=tmp_path) == {"chapter": False}
    assert check_records({"gone": record}, cache_dir=tmp_path) == {"gone": False}
    elsewhere = {**record, "device": "LFE5U-45F"}                  # placed on another device than its chip's
    assert check_records({"chapter": elsewhere}, cache_dir=tmp_path) == {"chapter": False}


# -- every chip on Verilator ----------------------------------------------------------------------------------

# The chips of at most 8,192 scratchpad words without a port per array cell (row_b) build in about a minute; the
# others (Verilog alone takes minutes for fast's per-cell ports and for llm) run in the slow tier.
QUICK = [n for n in CHIP_NAMES if chip(n).config.sp_words <= 8192 and not chip(n).config.row_b]


def test_the_quick_chips_are_checked_in_every_run():
    assert QUICK == ["chapter", "decoupled", "axi", "chapter8", "decoupled8", "chapter2"]


def _fuzz_on_verilator(config, count, seed):
    """``count`` random programs of ``config`` on Verilator against the reference machine."""
    import io
    from sim.backends import get_backend
    from sim.commands import fuzz
    reason = get_backend("verilator").unavailable_reason()
    if reason:
        pytest.skip(reason)
    done, _, failure = fuzz(config, count, seed, "verilator", progress=False, out=io.StringIO())
    assert failure is None and done == count, (config, failure and failure["diffs"])


def _on_verilator(config, count, seed):
    """The chapter's decode steps and ``count`` random programs of ``config`` on Verilator, each against the
    reference machine (memories, the six counters, error, pc)."""
    from sim.decode_table import decode_table
    from synth.datasheet import chapter_workload
    _fuzz_on_verilator(config, count, seed)
    rows, _ = decode_table(chapter_workload(config), "verilator")
    assert all(r["matches_reference"] for r in rows), [r["name"] for r in rows if not r["matches_reference"]]


@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in CHIP_NAMES])
def test_every_chip_on_verilator_is_the_model(name):
    _on_verilator(chip(name).config, 40, seed=7)


@pytest.mark.slow
@pytest.mark.parametrize("name", CHIP_NAMES)
def test_a_thousand_random_programs_per_chip(name):
    _on_verilator(chip(name).config, 1000, seed=11)


def random_config(rng):
    """A random valid configuration of a size Verilator builds in about a minute: array 1..8 x 1..8, scratchpad
    64..4096 words, any bank count, port, lane and overlap option in either mode, whole-word stores on a packed
    port, wide scores with the online unit (drawn until Config accepts)."""
    while True:
        mode = rng.choice(["inorder", "decoupled"])
        banks = rng.choice([4, 8, 16, 32])
        kw = dict(mode=mode, rows=rng.randint(1, 8), cols=rng.randint(1, 8), sp_banks=banks,
                  sp_words=rng.choice([64, 256, 1024, 4096]), ext_words=rng.choice([512, 4096, 65536]),
                  imem_words=rng.choice([16, 64, 256]), ext_latency=rng.randint(1, 8),
                  sm_max_len=rng.choice([16, 64]), online_unit=rng.randint(0, 1))
        if mode == "decoupled":
            kw.update(bus_bytes=rng.choice([1, 4, 8, 16]), axi=rng.randint(0, 1), row_writes=rng.randint(0, 1),
                      row_b=rng.randint(0, 1), rq_overlap=rng.randint(0, 1), rq_lanes=rng.choice([1, 1, 2, 4]),
                      sm_lanes=rng.randint(1, 2), ld_overlap=rng.randint(0, 1))
        if kw.get("bus_bytes", 1) > 1:
            kw["st_words"] = rng.randint(0, 1)
        if kw["online_unit"]:
            kw["wide_scores"] = rng.randint(0, 1)
        try:
            return Config(**kw)
        except ValueError:
            continue


def test_random_configurations_are_valid_and_varied():
    import random
    rng = random.Random(5)
    drawn = [random_config(rng) for _ in range(200)]
    assert len({c.to_json() for c in drawn}) == 200
    assert {c.mode.value for c in drawn} == {"inorder", "decoupled"} and any(c.axi for c in drawn)
    assert any(c.rq_lanes > 1 for c in drawn) and any(c.bus_bytes == 16 for c in drawn)
    assert any(c.st_words for c in drawn) and any(c.wide_scores for c in drawn)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_configurations_on_verilator(seed):
    """Random valid configurations x random programs, Verilator against the reference machine."""
    import random
    config = random_config(random.Random(1000 + seed))
    _fuzz_on_verilator(config, 200, seed)


def test_measured_fmax_reads_the_chip_s_own_record(tmp_path):
    from ga2_sw.chips import measured_fmax
    path = tmp_path / "d.json"
    sheet = {"fmax_mhz": 99.5}
    path.write_text(json.dumps({"chips": {
        "chapter": {"config": chip("chapter").config.to_dict(), "datasheet": sheet},
        "decoupled": {"config": chip("decoupled").config.replace(rows=2).to_dict(), "datasheet": sheet}}}))
    assert measured_fmax("chapter", path) == 99.5
    assert measured_fmax("decoupled", path) is None          # recorded for another configuration
    assert measured_fmax("fast", path) is None               # not measured
    # A record made before a field was added lacks it: the field was at its default, the chip is today's.
    earlier = {k: v for k, v in chip("long").config.to_dict().items() if k not in ("st_words", "wide_scores")}
    path.write_text(json.dumps({"chips": {"long": {"config": earlier, "datasheet": sheet}}}))
    assert measured_fmax("long", path) == 99.5
    path.write_text("[]")
    with pytest.raises(ValueError, match="not a datasheet record file"):
        measured_fmax("chapter", path)


def test_the_fmax_text_says_a_seed_did_not_route():
    from synth.nextpnr import median_of_seeds
    from synth.report import fmax_text
    r = median_of_seeds([_run(1, 101.0), _run(2, None, "stopped after 60 s of CPU time, routing"), _run(3, 104.2)])
    r.update(device="25k", target_mhz=100, utilisation={})
    text = fmax_text(r)
    assert "no Fmax: of seeds 1, 2, 3, seed 2 did not route" in text and "seed 2: unrouted, stopped after 60 s" in text


def test_a_datasheet_records_the_router_its_seeds_were_routed_with(tmp_path, monkeypatch, capsys):
    """`python -m synth datasheet --router router2` routes every seed with router2 and says so in the record
    (a field and the command that measured it); router1, the default, leaves the command as it was; another
    router is refused in one line (exit status 2). Yosys and nextpnr are stood in for here."""
    import json
    import synth.nextpnr as nextpnr
    import synth.yosys as yosys
    from synth.__main__ import main as synth_main
    asked = []

    def fake_seeds(config, device, seeds, router, **kw):
        asked.append(router)
        per = [{"seed": s, "fmax_mhz": 100.0 + s, "seconds": 1.0, "critical_path": None} for s in seeds]
        return {"fmax_mhz": 102.0, "per_seed": per}
    monkeypatch.setattr(nextpnr, "fmax_seeds", fake_seeds)
    monkeypatch.setattr(yosys, "ecp5_netlist", lambda config, cache_dir=None: {"total": {"LUT4": 10}})
    record = tmp_path / "sheets.json"
    for router in ("router2", "router1"):
        assert synth_main(["datasheet", "--chip", "chapter", "--router", router, "--sims", "model",
                           "--record", str(record)]) == 0
        sheet = json.loads(record.read_text())["chips"]["chapter"]["datasheet"]
        assert asked[-1] == sheet["router"] == router and sheet["fmax_mhz"] == 102.0
        assert sheet["command"] == "python -m synth datasheet --chip chapter" + (
            " --router router2" if router == "router2" else "")
    assert "nextpnr router2" in capsys.readouterr().out.split("recorded")[0]
    assert synth_main(["datasheet", "--chip", "chapter", "--router", "router3"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
