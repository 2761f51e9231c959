"""The packages are layers that import one way (README, "Using it"): ``ga2_sw`` (the ISA, numerics, reference
machine, cycle model, builders) at the bottom, the chip ``ga2_hdl`` on it, ``sim`` (every simulator) on both,
``synth`` on those, and ``ga2_soc`` (the LiteX SoC) at the top. Every import counts, a function's own included.

The modules of ``ga2_sw`` that still run a simulator themselves (commands and analyses with ``--sim``) are
listed in ``KNOWN_UPWARD``: the list may only shrink, so a module that stops reaching up must leave it."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("ga2_sw", "ga2_hdl", "sim", "synth", "ga2_soc")      # each may import those before it

KNOWN_UPWARD = {
    "ga2_sw.analyses.bus": {"sim"},
    "ga2_sw.analyses.latency": {"sim"},
    "ga2_sw.analyses.weight_stream": {"sim"},
    "ga2_sw.commands.batching": {"sim"},
    "ga2_sw.commands.decode_table": {"sim"},
    "ga2_sw.commands.llm": {"sim"},
    "ga2_sw.commands.prefill": {"sim"},
    "ga2_sw.commands.tools": {"sim"},
    "ga2_sw.llm.chip_steps": {"sim"},
}


def _imported_packages(path, module):
    """The top-level project packages ``module`` (at ``path``) imports, function-local imports included."""
    found = set()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            names = [".".join(base + ([node.module] if node.module else []))]
        else:
            continue
        found |= {name.split(".")[0] for name in names if name.split(".")[0] in LAYERS}
    return found


def _upward_imports():
    out = {}
    for rank, package in enumerate(LAYERS):
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            above = {p for p in _imported_packages(path, module) if LAYERS.index(p) > rank}
            if above:
                out[module] = above
    return out


def test_the_layers_import_one_way():
    assert _upward_imports() == KNOWN_UPWARD


def test_the_check_sees_a_function_local_import(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from sim.backends import get_backend\n    from ..cycles import x\n")
    assert _imported_packages(path, "ga2_sw.analyses.m") == {"sim", "ga2_sw"}
