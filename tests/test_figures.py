"""synth/figures.py: the documented Fmax figures, each with the Verilog it was placed on (``python -m synth
figures``)."""

import hashlib
import json
import shlex
import statistics
from pathlib import Path

import pytest

from ga2_sw.llm.step_cycles import FMAX_COMMAND, MEASURED_FMAX_MHZ
from synth.__main__ import main as synth_main
from synth.figures import RECORD, check_figures, load_figures

ROOT = Path(__file__).resolve().parent.parent
SMALL = "python -m synth fmax --mode inorder --rows 2 --cols 2 --sp-words 256 --ext-words 512 --imem-words 64"


def test_every_recorded_figure_is_quoted_where_it_says():
    """A re-measured figure is changed in the record and where it is quoted, or this fails."""
    for e in load_figures():
        for name in e["quoted_in"]:
            assert f"{e['fmax_mhz']:g}" in (ROOT / name).read_text(), (e["figure"], name)
        assert len(e["per_seed_mhz"]) == len(e["seeds"]) and statistics.median(e["per_seed_mhz"]) == e["fmax_mhz"]


def test_the_online_chip_figure_is_the_one_the_llm_projection_uses():
    online = [e for e in load_figures() if e["command"] == FMAX_COMMAND]
    assert len(online) == 1 and online[0]["fmax_mhz"] == MEASURED_FMAX_MHZ["4x4"]


def _verilog_sha(command, cache_dir):
    """The sha256 of the body of the command's Verilog: everything after the header comment, hashed here."""
    from synth.figures import _config_of
    from synth.yosys import _verilog
    path, sha = _verilog(_config_of(command), cache_dir)
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == sha       # the file's own hash, not a key
    text = Path(path).read_text()
    header = [line for line in text.splitlines()[:6] if line.startswith("//")]
    return hashlib.sha256(text.split("\n", len(header))[-1].encode()).hexdigest()


def _record(tmp_path, sha):
    path = tmp_path / "figures.json"
    path.write_text(json.dumps([{"figure": "2x2", "command": SMALL, "fmax_mhz": 100.0, "seeds": [1],
                                 "per_seed_mhz": [100.0], "measured": "today", "verilog_sha256": "0" * 64,
                                 "verilog_body_sha256": sha, "quoted_in": []}]))
    return path


def test_a_figure_is_current_only_on_its_own_verilog(tmp_path, capsys):
    cache = tmp_path / "cache"
    sha = _verilog_sha(SMALL, cache)
    assert check_figures(load_figures(_record(tmp_path, sha)), cache_dir=cache)[0]["current"]
    none = tmp_path / "datasheets.json"
    none.write_text('{"chips": {}}')
    assert synth_main(["figures", "--record", str(_record(tmp_path, sha)), "--datasheets", str(none),
                       "--cache-dir", str(cache)]) == 0
    # Another array size is other Verilog: the same record is stale for it.
    other = SMALL.replace("--rows 2", "--rows 3")
    assert _verilog_sha(other, cache) != sha
    stale = _record(tmp_path, sha)
    stale.write_text(stale.read_text().replace(SMALL, other))
    assert synth_main(["figures", "--record", str(stale), "--datasheets", str(none), "--cache-dir", str(cache)]) == 1
    assert "NO: measure again" in capsys.readouterr().out


def test_a_new_configuration_field_stales_no_figure(tmp_path):
    """The header names the hardware fields and the tools; a figure follows the body. A workload field the
    circuit never reads (clock_mhz, the DRAM's clock) changes neither; a header that differs (another tool's
    version, as a new field or an upgrade gives) leaves the body's sha256 as it was."""
    from ga2_hdl.generate import body_sha256
    from synth.figures import _config_of
    from synth.yosys import _verilog
    cache = tmp_path / "cache"
    other = SMALL + " --clock-mhz 50"
    assert _verilog(_config_of(SMALL), cache)[1] == _verilog(_config_of(other), cache)[1]
    text = Path(_verilog(_config_of(SMALL), cache)[0]).read_text()
    header, body = text.split("\n", 2)[:2], text.split("\n", 2)[2]
    renamed = "\n".join([header[0], header[1] + ", a_new_field=1", body])
    assert body_sha256(renamed) == body_sha256(text) == _verilog_sha(other, cache)
    assert check_figures(load_figures(_record(tmp_path, _verilog_sha(other, cache))), cache_dir=cache)[0]["current"]


@pytest.mark.parametrize("text, says", [
    ("[{", "cannot read"),
    ('{"figure": 1}', "expected a list"),
    ('[{"figure": "x"}]', "figure 0: missing or malformed field(s) command"),
])
def test_a_bad_record_is_one_line_and_exit_2(tmp_path, capsys, text, says):
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert synth_main(["figures", "--record", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err and str(path) in err


def test_a_recorded_command_that_does_not_parse_is_named(tmp_path, capsys):
    path = _record(tmp_path, "0" * 64)
    path.write_text(path.read_text().replace("--rows 2", "--rows 0"))
    assert synth_main(["figures", "--record", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "figure 0 (2x2)" in err and "--rows" in err


def test_the_record_names_the_commands_that_measured_them():
    for e in load_figures(RECORD):
        argv = shlex.split(e["command"])
        assert argv[:4] == ["python", "-m", "synth", "fmax"] and "--seeds" in argv
        assert [int(s) for s in argv[argv.index("--seeds") + 1].split(",")] == e["seeds"]
