"""Every command README.md and docs/ quote (an inline code span that starts ``ga2``, ``python -m ga2_hdl`` or
``python -m synth``) parses: no option the command lacks, no choice or value out of range, no output it cannot
write. The spans are parsed, not run; a span that names a command without its arguments (``ga2 run``), or
shows its synopsis (``[--json F]``, ``NAME``), is a mention, not a command."""

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# A synopsis, not a command line: optional parts, alternatives, placeholders.
SYNOPSIS = re.compile(r"[\[\]|<>{}]|\.\.\.|\b(NAME|N|F|B|L|S|W|FILE|DIR|PROG|PROMPT|PROMPTS|MHz)\b")
# What parsing says of a fragment: a mention of a command, or of an option without its value.
FRAGMENT = ("the following arguments are required", "expected one argument")
# ... or of an example whose input is the reader's own file (`ga2 asm prog.s`; a path the project holds, with a
# folder, must exist).
READERS_FILE = re.compile(r": ([^/\s]+): no such file$")


def _parsers():
    import ga2_cli
    import ga2_hdl.commands
    import synth.__main__
    return {"ga2": ga2_cli.build_parser(), "python -m ga2_hdl": ga2_hdl.commands.build_parser(),
            "python -m synth": synth.__main__.build_parser()}


def quoted_commands(pages=PAGES, prefixes=("ga2", "python -m ga2_hdl", "python -m synth")):
    """``[(page, prefix, command line)]``: the lines of ``pages``' fenced code blocks and their inline code spans
    that are command lines of one of ``prefixes`` (``time`` before one dropped; a comment, a pipe or a
    redirection after one and the commands after an ``&&`` cut off)."""
    out = []
    for page in pages:
        text = page.read_text()
        blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.M | re.S)     # fenced: a command a line
        lines = [ln.split(" #")[0] for block in blocks for ln in block.splitlines()]
        inline = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S).replace("\n", " ")
        for span in lines + re.findall(r"`([^`]+)`", inline):
            line = re.sub(r"^time ", "", " ".join(span.split()))
            line = re.split(r" (?:&&|\||>|2>)", line)[0]
            prefix = next((p for p in prefixes if line.startswith(p + " ")), None)
            if prefix and not SYNOPSIS.search(line):
                out.append((page.name, prefix, line))
    return out


def _refusal(parser, argv):
    """Why ``parser`` refuses ``argv`` (its one line on stderr), or None."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            return (err.getvalue().strip() or f"exit {exc.code}") if exc.code else None
    return None


def test_the_pages_quote_commands():
    assert len(quoted_commands()) >= 30


def test_every_quoted_command_parses(monkeypatch):
    monkeypatch.chdir(ROOT)                     # the pages' commands run from the project's folder
    parsers, refused = _parsers(), []
    for page, prefix, line in quoted_commands():
        why = _refusal(parsers[prefix], shlex.split(line[len(prefix):]))
        if why and not any(f in why for f in FRAGMENT) and not READERS_FILE.search(why):
            refused.append(f"{page}: `{line}`: {why}")
    assert not refused, "\n".join(refused)


def test_a_misspelt_option_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Run `ga2 llm cycles --chips 4` and `ga2 run` and `ga2 chips [--json F]`.\n")
    found = quoted_commands([page])
    assert [line for _, _, line in found] == ["ga2 llm cycles --chips 4", "ga2 run"]
    assert "unrecognized arguments: --chips 4" in _refusal(_parsers()["ga2"], ["llm", "cycles", "--chips", "4"])
    assert any(f in _refusal(_parsers()["ga2"], ["run"]) for f in FRAGMENT)


@pytest.mark.parametrize("line", ["ga2 soc build", "ga2 llm throughput --chip llm --batches 1,2,4,8 --contexts 64,1024"])
def test_commands_with_their_defaults_parse_in_a_fresh_folder(line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _refusal(_parsers()["ga2"], shlex.split(line)[1:]) is None
