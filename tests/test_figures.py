"""``python -m synth figures``: is each chip's recorded datasheet still of today's Verilog? A datasheet belongs to
the body of the Verilog it was placed on (``ga2_hdl.generate.body_sha256``), so a change of the RTL stales it and
a change of the header (a workload field, a tool's version) does not."""

import copy
import hashlib
import json
from pathlib import Path

from ga2_hdl.generate import body_sha256
from ga2_sw.chips import chip, load_datasheets
from synth.__main__ import main as synth_main
from synth.datasheet import check_records
from synth.yosys import _verilog


def _body(config, cache):
    path, sha = _verilog(config, cache)
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == sha       # the file's own hash, not a key
    return body_sha256(Path(path).read_text())


def _records(tmp_path, name, body):
    """A record file holding one datasheet of chip ``name`` placed on Verilog whose body hashes to ``body``."""
    record = {"name": name, "purpose": chip(name).purpose, "device": chip(name).device_name,
              "config": chip(name).config.to_dict(), "datasheet": {"verilog_body_sha256": body}}
    path = tmp_path / "datasheets.json"
    path.write_text(json.dumps({"chips": {name: record}}))
    return path


def test_a_datasheet_is_current_only_on_its_own_verilog(tmp_path, capsys):
    cache = tmp_path / "cache"
    body = _body(chip("chapter").config, cache)
    current = _records(tmp_path, "chapter", body)
    assert check_records(load_datasheets(current), cache_dir=cache) == {"chapter": True}
    assert synth_main(["figures", "--datasheets", str(current), "--cache-dir", str(cache)]) == 0
    stale = _records(tmp_path, "chapter", "0" * 64)
    assert synth_main(["figures", "--datasheets", str(stale), "--cache-dir", str(cache)]) == 1
    captured = capsys.readouterr()
    assert "NO: measure again" in captured.out and "--chip chapter" in captured.err


def test_a_record_of_another_configuration_is_stale(tmp_path):
    cache = tmp_path / "cache"
    path = _records(tmp_path, "chapter", _body(chip("chapter").config, cache))
    records = load_datasheets(path)
    changed = copy.deepcopy(records)
    changed["chapter"]["config"]["rows"] = 8
    assert check_records(changed, cache_dir=cache) == {"chapter": False}
    assert check_records({"gone": records["chapter"]}, cache_dir=cache) == {"gone": False}


def test_a_new_configuration_field_stales_no_datasheet(tmp_path):
    """The header names the hardware fields and the tools; a datasheet follows the body. A workload field the
    circuit never reads (clock_mhz, the DRAM's clock) changes neither; a header that differs (another tool's
    version, as a new field or an upgrade gives) leaves the body's sha256 as it was."""
    cache = tmp_path / "cache"
    config = chip("chapter").config
    assert _verilog(config, cache)[1] == _verilog(config.replace(clock_mhz=50), cache)[1]
    text = Path(_verilog(config, cache)[0]).read_text()
    header, body = text.split("\n", 2)[:2], text.split("\n", 2)[2]
    renamed = "\n".join([header[0], header[1] + ", a_new_field=1", body])
    assert body_sha256(renamed) == body_sha256(text)


def test_a_bad_record_file_is_one_line_and_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text('{"chips": [1]}')
    assert synth_main(["figures", "--datasheets", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err
