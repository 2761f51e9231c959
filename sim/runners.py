"""Program runners by name: what ``ga2 check-batching --sim NAME`` runs the invariance check on.

A runner is ``run(program, ext) -> ext``: it executes one program on a fresh machine whose external memory
starts as ``ext`` and returns the external memory afterwards, raising on a fault. Each entry below is a
factory ``config -> runner``; a simulator of the RTL is added here as one more entry."""

__all__ = ["get_runner", "runner_names"]


def _model(config):
    from ga2_sw.check import machine_runner
    return machine_runner(config)


def _pysim(config):
    from .pysim_runner import PysimRunner
    return PysimRunner(config)


def _verilator(config):
    from .verilator import VerilatorRunner
    return VerilatorRunner(config)


def _icarus(config):
    from .backends import unavailable_reason
    reason = unavailable_reason("icarus")
    if reason:
        raise ValueError(reason)
    from .icarus import IcarusRunner
    return IcarusRunner(config)


# name -> (factory, one-line description)
_RUNNERS = {
    "model": (_model, "the Python reference machine (ga2_sw.machine)"),
    "pysim": (_pysim, "the Amaranth RTL in Amaranth's Python simulator (slow: about 4,000 cycles/s)"),
    "verilator": (_verilator, "the generated Verilog in Verilator (a C++ harness, built once and cached)"),
    "icarus": (_icarus, "the generated Verilog in Icarus Verilog, when iverilog is installed"),
}


def runner_names():
    """The known runner names, with their descriptions."""
    return {name: text for name, (_, text) in _RUNNERS.items()}


def get_runner(name, config):
    """The runner called ``name`` for ``config``; ValueError listing the known names for an unknown one."""
    try:
        factory, _ = _RUNNERS[name]
    except KeyError:
        raise ValueError(f"Unknown simulator {name!r}; known: {', '.join(_RUNNERS)}") from None
    return factory(config)
