"""Are the documented Fmax figures still those of today's RTL? ``python -m synth figures``.

A place-and-route figure belongs to one Verilog netlist: a renamed wire alone moved the in-order chip's seeds by
up to 10% (docs/SYNTH.md, "Session 23"), and a change to a unit both modes share changes a chip nobody meant to
touch. So each figure the README and docs/SYNTH.md quote is recorded in ``figures.json`` beside this module with
the command that measured it and the sha256 of the Verilog it placed (``fmax``'s JSON gives it as
``verilog_sha256``) and of that Verilog's body (``verilog_body_sha256``: the circuit, without the header comment
that names every configuration field and tool version, so that a new configuration field, which changes every
chip's header, stales no figure of a chip whose circuit it leaves alone). This module regenerates each command's
Verilog and says which figures no longer describe its body: those must be measured again (and the file updated
from the new JSON) or called stale where they are quoted.
"""

import contextlib
import io
import json
import shlex
from pathlib import Path

__all__ = ["RECORD", "load_figures", "check_figures", "figures_table"]

RECORD = Path(__file__).with_name("figures.json")
_PREFIX = ["python", "-m", "synth"]


def load_figures(path=RECORD):
    """The recorded figures: a list of ``{"figure", "command", "fmax_mhz", "seeds", "measured",
    "verilog_sha256", "verilog_body_sha256", "quoted_in"}``; ValueError naming the file and the entry when one is malformed."""
    try:
        entries = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the recorded figures: {exc}") from None
    need = {"figure": str, "command": str, "fmax_mhz": (int, float), "seeds": list, "measured": str,
            "verilog_sha256": str, "verilog_body_sha256": str, "quoted_in": list}
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list of figures")
    for n, e in enumerate(entries):
        bad = [k for k, t in need.items() if not isinstance(e.get(k) if isinstance(e, dict) else None, t)]
        if bad:
            raise ValueError(f"{path}: figure {n}: missing or malformed field(s) {', '.join(bad)}")
        if shlex.split(e["command"])[:4] != _PREFIX + ["fmax"]:
            raise ValueError(f"{path}: figure {n} ({e['figure']}): the command must start "
                             f"'python -m synth fmax', not {e['command']!r}")
        try:
            _config_of(e["command"])
        except ValueError as exc:
            raise ValueError(f"{path}: figure {n} ({e['figure']}): {exc}") from None
    return entries


def _config_of(command):
    """The configuration a recorded ``python -m synth fmax ...`` command builds (its own parser); ValueError
    with the parser's one-line message when the command is not a valid one."""
    from ga2_sw.cli import config_from_args
    from .__main__ import build_parser
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = build_parser().parse_args(shlex.split(command)[len(_PREFIX):])
    except SystemExit:
        raise ValueError(f"{command!r}: {said.getvalue().strip() or 'not a valid command'}") from None
    return config_from_args(args)


def check_figures(entries, cache_dir=None, progress=None):
    """Each entry with ``current`` (its Verilog's body is today's), ``verilog_now`` (today's file's sha256) and
    ``verilog_body_now`` (its body's)."""
    from ga2_hdl.generate import body_sha256
    from .yosys import _verilog
    out = []
    for n, e in enumerate(entries):
        if progress:
            progress(n, len(entries), e["figure"])
        path, sha = _verilog(_config_of(e["command"]), cache_dir)
        body = body_sha256(Path(path).read_text())
        out.append({**e, "verilog_now": sha, "verilog_body_now": body, "current": body == e["verilog_body_sha256"]})
    return out


def figures_table(checked):
    """A table for people: figure, median MHz, seeds, when measured, and whether it is still today's."""
    from .report import table
    return table(("figure", "Fmax MHz", "seeds", "measured", "today's RTL"),
                 [(e["figure"], f"{e['fmax_mhz']:g}", ",".join(map(str, e["seeds"])), e["measured"],
                   "yes" if e["current"] else "NO: measure again") for e in checked],
                 align=["<", ">", "<", "<", "<"])
