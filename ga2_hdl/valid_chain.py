"""The valid bits of a fixed-latency pipeline, counted as its stages are built, so that an ``elaborate`` can
check the depth it built against the cycle model (``ga2_sw.timing``) before it returns."""

from amaranth.hdl import Signal, Value

__all__ = ["ValidChain", "delayed"]


def delayed(m, value, cycles, name):
    """``value`` as it was ``cycles`` cycles ago (a chain of registers named ``name``, ``name_1``, ...)."""
    shape = Value.cast(value).shape()
    for n in range(cycles):
        reg = Signal(shape, name=name if n == cycles - 1 else f"{name}_{n + 1}")
        m.d.sync += reg.eq(value)
        value = reg
    return value


class ValidChain:
    """One valid register per pipeline stage, each loaded from the previous stage's valid bit.

    ``stage(name, *statements)`` builds the next stage: its valid bit ``{name}_valid`` and, in the same
    ``sync`` assignment, the stage's data registers (``statements``); a stage may have none when its data
    register is a memory's own (a block RAM read). ``through(...)`` passes the chain through a pipelined
    submodule. ``check(depth, what)`` raises :class:`AssertionError` at elaboration when the number of
    stages built is not ``depth``: a pipeline change that forgets the cycle model does not build.
    """

    def __init__(self, m, valid, *, reset_less=False):
        self._m = m
        self._valid = valid
        self._depth = 0
        self._registers = []
        self._reset_less = reset_less

    def stage(self, name, *statements):
        valid = Signal(name=f"{name}_valid", reset_less=self._reset_less)
        self._m.d.sync += [valid.eq(self._valid), *statements]
        self._registers.append(valid)
        self._valid = valid
        self._depth += 1
        return valid

    def through(self, valid_i, valid_o, latency):
        """Drive a pipelined submodule's ``valid_i`` from the chain; its ``valid_o``, ``latency`` stages
        later (the submodule checks its own depth), is the chain's new end."""
        self._m.d.comb += valid_i.eq(self._valid)
        self._valid = valid_o
        self._depth += latency

    @property
    def valid(self):
        """The last stage's valid bit (the chain's input while no stage is built)."""
        return self._valid

    @property
    def depth(self):
        """The number of registered stages built so far."""
        return self._depth

    @property
    def busy(self):
        """Any of the chain's own valid registers holds an item."""
        busy = 0
        for bit in self._registers:
            busy = busy | bit
        return busy

    def check(self, depth, what):
        if self._depth != depth:
            raise AssertionError(f"{what} builds {self._depth} registered stages where the cycle model "
                                 f"(ga2_sw.timing) needs {depth}")
