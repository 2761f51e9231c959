"""A fully pipelined unsigned restoring divider: one quotient bit per stage, one division per cycle."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ga2_sw.timing import DIVIDER_LATENCY

from ..valid_chain import ValidChain

__all__ = ["Divider", "divide_step"]


def divide_step(remainder, next_bit, den):
    """One restoring step: shift ``next_bit`` of the numerator into ``remainder`` and subtract ``den`` if it
    fits. Returns ``(quotient_bit, new_remainder)``; with ``remainder < den`` on entry the new remainder is
    again ``< den``, so it fits the width of ``den``."""
    trial = Cat(next_bit, remainder)            # remainder * 2 + next_bit, one bit wider than den
    fits = trial >= den
    return fits, Mux(fits, trial - den, trial)[:len(den)]


class Divider(wiring.Component):
    """``quot = num // den`` on unsigned integers, ``quot_width`` pipeline stages.

    Stage ``k`` (``k = 0 .. quot_width-1``) decides quotient bit ``quot_width-1-k`` and registers its partial
    remainder, the numerator bits still to be shifted in, the divisor and the quotient bits found so far.
    Inputs presented with ``valid_i`` in cycle ``c`` give ``quot`` with ``valid_o`` in cycle
    ``c + latency`` (``latency == quot_width``; by default ``DIVIDER_LATENCY``, the softmax's, from
    ``ga2_sw.timing``), read combinationally from the last stage's registers. A new division may start every
    cycle.

    Precondition: ``num < den * 2**quot_width``, that is the quotient fits ``quot_width`` bits (and
    ``den > 0``). The first stage starts from the partial remainder ``num >> quot_width``, which is then
    ``< den`` and fits ``den_width`` bits; outside the precondition ``quot`` is meaningless. The softmax
    meets it: ``e*65536 + S//2 < S * 2**17`` because ``e <= S``.

    Parameters
    ----------
    num_width : int
        Width of the numerator.
    den_width : int
        Width of the divisor.
    quot_width : int
        Width of the quotient, and the number of pipeline stages (``DIVIDER_LATENCY`` by default).

    Members
    -------
    num : In(num_width)
        Numerator.
    den : In(den_width)
        Divisor.
    valid_i : In(1)
        ``num`` and ``den`` hold a division to perform.
    quot : Out(quot_width)
        ``num // den`` of the inputs of ``latency`` cycles ago.
    valid_o : Out(1)
        ``valid_i`` of ``latency`` cycles ago: ``quot`` is a result.
    """

    def __init__(self, *, num_width=33, den_width=27, quot_width=DIVIDER_LATENCY):
        for name, value in (("Numerator", num_width), ("Divisor", den_width), ("Quotient", quot_width)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TypeError(f"{name} width must be a positive integer, not {value!r}")
        if num_width < quot_width:
            raise ValueError(f"Numerator width must be at least the quotient width ({quot_width}), "
                             f"not {num_width!r}")
        self._num_width = num_width
        self._den_width = den_width
        self._quot_width = quot_width
        super().__init__({
            "num": In(num_width),
            "den": In(den_width),
            "valid_i": In(1),
            "quot": Out(quot_width),
            "valid_o": Out(1),
        })

    @property
    def num_width(self):
        return self._num_width

    @property
    def den_width(self):
        return self._den_width

    @property
    def quot_width(self):
        return self._quot_width

    @property
    def latency(self):
        """Cycles from ``valid_i`` to ``valid_o``: one per quotient bit."""
        return self._quot_width

    def elaborate(self, platform):
        m = Module()
        qw, dw = self._quot_width, self._den_width

        # Values entering stage 0, straight from the inputs. Truncating the high part to den_width bits is
        # safe under the precondition (num >> quot_width < den).
        remainder = self.num[qw:][:dw]
        low_bits = self.num[:qw]              # numerator bits not yet shifted into the remainder
        den = self.den
        quot = Cat()                          # quotient bits found so far, most significant first
        chain = ValidChain(m, self.valid_i)

        for k in range(qw):
            bit = qw - 1 - k
            q_bit, next_remainder = divide_step(remainder, low_bits[bit], den)

            stage_remainder = Signal(dw, name=f"rem{k}")
            stage_den = Signal(dw, name=f"den{k}")
            stage_quot = Signal(k + 1, name=f"quot{k}")
            chain.stage(f"stage{k}", stage_remainder.eq(next_remainder), stage_den.eq(den),
                        stage_quot.eq(Cat(q_bit, quot)))
            if bit > 0:
                stage_low = Signal(bit, name=f"low{k}")
                m.d.sync += stage_low.eq(low_bits[:bit])
                low_bits = stage_low
            remainder, den, quot = stage_remainder, stage_den, stage_quot
        chain.check(self.latency, "The divider")

        m.d.comb += [
            self.quot.eq(quot),
            self.valid_o.eq(chain.valid),
        ]
        return m
