"""The packages are layers that import one way (README, "Using it"): ``ga2_sw`` (the ISA, numerics, reference
machine, cycle model, builders) at the bottom, the chip ``ga2_hdl`` on it, ``sim`` (every simulator) on both,
``synth`` on those, ``ga2_soc`` (the LiteX SoC) above, and ``ga2_cli`` (the ``ga2`` command line, which lists every
package's command modules) at the top. Every import counts: a function's own, and a module named in a string
(for importlib). No module imports itself through others (no import cycles)."""

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


def _module_graph():
    """Every project module and the project modules it imports (function-local imports included)."""
    modules = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(name):                      # a module, or the module a name imported from it lives in
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in modules.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
                source = ".".join(p for p in (base, node.module) if p)
                names = [source] + [f"{source}.{alias.name}" for alias in node.names]
            else:
                continue
            edges |= {resolve(n) for n in names} - {"", module}
        graph[module] = edges
    return graph


def _cycles(graph):
    """The import cycles of ``graph`` (module -> the modules it imports), each as the path that closes it."""
    cycles, done = [], set()

    def walk(module, path):                 # depth first; a module met again on the path closes a cycle
        if module in path:
            cycles.append(path[path.index(module):] + [module])
            return
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            walk(target, path + [module])
        done.add(module)
    for module in sorted(graph):
        walk(module, [])
    return cycles


def test_no_import_cycles():
    assert _cycles(_module_graph()) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
