"""The chip's components take the keyword-only parameters they use, not the whole configuration (docs/ARCHITECTURE.md,
"Handshakes and ports"): ``ga2_hdl.top`` is the one place that reads them off a ``Config`` (``unit_parameters``,
``scratchpad_parameters``, ``checker_parameters``, ``scoreboard_parameters``). The top level alone is built from
the ``Config``."""

import importlib
import inspect
import pkgutil

from amaranth.lib import wiring

import ga2_hdl

BUILT_FROM_CONFIG = {"GA2"}


def _components():
    found = {}
    for info in pkgutil.walk_packages(ga2_hdl.__path__, "ga2_hdl."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, cls in vars(module).items():
            if (inspect.isclass(cls) and issubclass(cls, wiring.Component) and cls.__module__ == info.name):
                found[name] = cls
    return found


def test_components_take_keyword_parameters():
    components = _components()
    assert {"DMA", "PackedDMA", "AxiDMA", "MatrixUnit", "StreamFeeder", "Softmax", "OnlineUnit",
            "BankedScratchpad", "Sequencer", "InstrChecker", "CheckRanges", "CheckOperands",
            "Scoreboard"} <= set(components)
    for name, cls in components.items():
        if name in BUILT_FROM_CONFIG or cls.__init__ is wiring.Component.__init__:
            continue
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        assert all(p.kind is p.KEYWORD_ONLY for p in params), (name, [str(p) for p in params])
        assert "config" not in {p.name for p in params}, name


def test_the_top_level_is_the_rest():
    """The exceptions are components that exist (a rename would leave a stale entry here)."""
    assert BUILT_FROM_CONFIG <= set(_components())
