"""The packages are layers that import one way (README, "Using it"): ``ga2_sw`` (the ISA, numerics, reference
machine, cycle model, builders) at the bottom, the chip ``ga2_hdl`` on it, ``sim`` (every simulator) on both,
``synth`` on those, ``ga2_soc`` (the LiteX SoC) above, and ``ga2_cli`` (the ``ga2`` command line, which lists every
package's command modules) at the top. Every import counts: a function's own, and a module named in a string
(for importlib)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("ga2_sw", "ga2_hdl", "sim", "synth", "ga2_soc", "ga2_cli")     # each may import those before it


def _named_module(text):
    """Whether ``text`` is the dotted name of one of the project's modules (a string importlib would import)."""
    parts = text.split(".")
    if len(parts) < 2 or parts[0] not in LAYERS or not all(p.isidentifier() for p in parts):
        return False
    base = ROOT.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _docstrings(tree):
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _imported_packages(path, module):
    """The top-level project packages ``module`` (at ``path``) imports, function-local imports included, and
    those whose modules it names in a string (a list of modules for importlib, as ``ga2`` registers its
    commands), docstrings aside."""
    found = set()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    tree = ast.parse(path.read_text())
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if _named_module(node.value):
                found.add(node.value.split(".")[0])
            continue
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
    assert _upward_imports() == {}


def test_the_check_sees_a_function_local_import_and_a_named_module(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('"""Not sim.backends: a docstring."""\n\ndef f():\n    from sim.backends import get_backend\n'
                    '    from ..cycles import x\n')
    assert _imported_packages(path, "ga2_sw.analyses.m") == {"sim", "ga2_sw"}
    path.write_text('MODULES = ["synth.commands", "synth", "ga2_hdl.no_such_module"]\n')
    assert _imported_packages(path, "ga2_sw.m") == {"synth"}
