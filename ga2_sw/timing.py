"""The chip's latencies, said once.

The cycle model (``cycles.py``) builds its busy-time formulas from these numbers, the reference machine
models the scratchpad's write delay with them, and every RTL unit imports the ones it implements and asserts
at elaboration that its pipeline has exactly that depth: change a pipeline and the build fails until this
file, the cycle model and docs/ISA.md say the same."""

__all__ = ["FETCH_CYCLES", "ISSUE_CYCLES", "SP_WRITE_DELAY", "ST_OVERHEAD", "RQ_DEPTH", "DIVIDER_LATENCY",
           "SM_OVERHEAD", "STREAM_MM_OVERHEAD", "CHECK_LATENCY", "BANKED_READ_DELAY", "BANKED_DATA_DELAY",
           "compute_read_latency", "rq_latency", "sm_overhead"]

FETCH_CYCLES = 1        # the first instruction's fetch
ISSUE_CYCLES = 2        # decode, check: paid by every instruction, HALT and the faulting one included
SP_WRITE_DELAY = 1      # a unit's write request is registered before it reaches the scratchpad
ST_OVERHEAD = 1         # ST: the scratchpad read's latency before the first external write
RQ_DEPTH = 5            # requantiser: read, register, partial products, product, shift, round/saturate/write
DIVIDER_LATENCY = 17    # the softmax divider: one quotient bit per stage (Q16 probabilities up to 65536)
SM_OVERHEAD = 4 + DIVIDER_LATENCY   # read, score register, ROM, buffer read, then the divider
# Decoupled mode: a compute-lane read request is registered, its bank decoded, before it is routed to the banks
# (routed straight from the units' logic, the requests ran through the crossbar into 32 block RAMs in one
# cycle), and the data each bank reads is registered at the bank before the requester's bank select (from the
# block RAMs' slow clock-to-output across the die, into a 16-way select, was the next long path). Writes are
# registered anyway (SP_WRITE_DELAY): a read request and a write request of one cycle still reach the memory
# together. Every MM and SM takes two cycles more; the requantiser's first pipeline register is the bank's data
# register, so an RQ takes one more, and its read-to-write distance in the memory (what an overlapping RQ
# computes) is unchanged.
BANKED_READ_DELAY = 1
BANKED_DATA_DELAY = 1
# streaming MM (decoupled only): bank plan, read request register, slice read, bank data register, hold
# register, then the last PE's product and accumulate
STREAM_MM_OVERHEAD = 4 + BANKED_READ_DELAY + BANKED_DATA_DELAY
CHECK_LATENCY = 4       # load-time validation: cycles from the host's write to the error code's write


def compute_read_latency(config):
    """Cycles from a compute-lane unit's scratchpad read request to its data: 1, plus the banked scratchpad's
    request and data registers in decoupled mode."""
    return 1 + (BANKED_READ_DELAY + BANKED_DATA_DELAY if config.decoupled else 0)


def rq_latency(config):
    """Cycles from an RQ element's read request to its result: ``RQ_DEPTH``; decoupled, the banked scratchpad's
    request register adds one, and its data register takes the place of the requantiser's word register."""
    return RQ_DEPTH + (BANKED_READ_DELAY + BANKED_DATA_DELAY - 1 if config.decoupled else 0)


def sm_overhead(config):
    """The SM's busy time beyond its ``3 * len`` cycles: ``SM_OVERHEAD``, plus the cycles the banked scratchpad's
    request and data registers add to its reads in decoupled mode."""
    return SM_OVERHEAD + compute_read_latency(config) - 1
