"""The chip's latencies, said once.

The cycle model (``cycles.py``) builds its busy-time formulas from these numbers, the reference machine
models the scratchpad's write delay with them, and every RTL unit imports the ones it implements and asserts
at elaboration that its pipeline has exactly that depth: change a pipeline and the build fails until this
file, the cycle model and docs/ISA.md say the same."""

__all__ = ["FETCH_CYCLES", "ISSUE_CYCLES", "SP_WRITE_DELAY", "ST_OVERHEAD", "RQ_DEPTH", "DIVIDER_LATENCY",
           "SM_OVERHEAD", "STREAM_MM_OVERHEAD", "CHECK_LATENCY", "BANKED_READ_DELAY", "compute_read_latency"]

FETCH_CYCLES = 1        # the first instruction's fetch
ISSUE_CYCLES = 2        # decode, check: paid by every instruction, HALT and the faulting one included
SP_WRITE_DELAY = 1      # a unit's write request is registered before it reaches the scratchpad
ST_OVERHEAD = 1         # ST: the scratchpad read's latency before the first external write
RQ_DEPTH = 5            # requantiser: read, register, partial products, product, shift, round/saturate/write
DIVIDER_LATENCY = 17    # the softmax divider: one quotient bit per stage (Q16 probabilities up to 65536)
SM_OVERHEAD = 4 + DIVIDER_LATENCY   # read, score register, ROM, buffer read, then the divider
# Decoupled mode: a compute-lane read request is registered, its bank decoded, before it is routed to the banks
# (routed straight from the units' logic, the requests ran through the crossbar into 32 block RAMs in one
# cycle). Writes are registered anyway (SP_WRITE_DELAY), so only reads move: every MM, RQ and SM takes a cycle
# more, and an RQ's read-to-write distance in the memory (what an overlapping RQ computes) is unchanged.
BANKED_READ_DELAY = 1
# streaming MM (decoupled only): bank plan, read request register, slice read, hold register, then the last
# PE's product and accumulate
STREAM_MM_OVERHEAD = 4 + BANKED_READ_DELAY
CHECK_LATENCY = 4       # load-time validation: cycles from the host's write to the error code's write


def compute_read_latency(config):
    """Cycles from a compute-lane unit's scratchpad read request to its data: 1, plus the request register of
    the banked scratchpad in decoupled mode."""
    return 1 + (BANKED_READ_DELAY if config.decoupled else 0)
