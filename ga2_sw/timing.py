"""The chip's latencies, said once.

The cycle model (``cycles.py``) builds its busy-time formulas from these numbers, and every RTL unit imports
the ones it implements and asserts at elaboration that its pipeline has exactly that depth: change a pipeline
and the build fails until this file, the cycle model and docs/ISA.md say the same."""

__all__ = ["FETCH_CYCLES", "ISSUE_CYCLES", "SP_WRITE_DELAY", "DEBUG_READ_LATENCY", "RQ_DEPTH", "DIVIDER_LATENCY",
           "SM_OVERHEAD", "STREAM_MM_OVERHEAD", "CHECK_LATENCY", "BANKED_READ_DELAY", "BANKED_DATA_DELAY",
           "BANKED_SELECT_DELAY", "MM_PLAN_CYCLES", "MM_DRAIN_CYCLES", "PORT_B_ANNOUNCE",
           "vector_read_latency",
           "compute_read_latency", "dma_read_latency", "rq_latency", "sm_overhead"]

FETCH_CYCLES = 1        # the first instruction's fetch
ISSUE_CYCLES = 2        # decode, check: paid by every instruction, HALT and the faulting one included
SP_WRITE_DELAY = 1      # a unit's write request is registered before it reaches the scratchpad
RQ_DEPTH = 5            # requantiser: read, register, partial products, product, shift, round/saturate/write
DIVIDER_LATENCY = 17    # the softmax divider: one quotient bit per stage (Q16 probabilities up to 65536)
SM_OVERHEAD = 4 + DIVIDER_LATENCY   # read, score register, ROM, buffer read, then the divider
# The host's debug reads (ga2_hdl.top): data two cycles after the address, in both modes, so the host protocol
# does not depend on the mode (in order the scratchpad reads in one cycle and the top level registers the word).
DEBUG_READ_LATENCY = 2
# Decoupled mode: the banked scratchpad's crossbar is registered at each of its three legs. A compute-lane read
# request is registered, its bank decoded, before it is routed to the banks (routed straight from the units'
# logic, the requests ran through the crossbar into 32 block RAMs in one cycle); the data each bank reads is
# registered at the bank (from the block RAMs' slow clock-to-output across the die into a 16-way select was
# the next long path); and the word each requester selects from the banks is registered before the unit uses
# it (the select and the requantiser's multiplier in one cycle held the chip to 68 MHz). Writes are
# registered anyway (SP_WRITE_DELAY): a read request and a write request of one cycle still reach the memory
# together. Every MM, RQ and SM takes three cycles more. The DMA lane's port of the banks registers its read
# requests too (from the DMA's and the debug port's logic into 32 block RAMs was the next long path), but not
# their data: an ST takes one cycle more. That the requantiser's writes land later than in
# order after its reads is invisible because an RQ's destination is its source or disjoint from it
# (docs/ISA.md, OVERLAP).
BANKED_READ_DELAY = 1
BANKED_DATA_DELAY = 1
BANKED_SELECT_DELAY = 1
# The vector lane (RQ, SM) has port B before the matrix unit, which must know the banks the vector lane's requests
# will take before it requests its own: so the vector lane's read and write requests are registered a cycle more
# before the banks, and the matrix unit reads their banks, one bit each, from that register (decoded there from
# the units' addresses in the same cycle, the adders and the feeder's arbitration were one path: 65 MHz on a 45F).
# An RQ and an SM take a cycle more.
PORT_B_ANNOUNCE = 1
# streaming MM (decoupled only): the first slice's addresses, then its bank plan, before the first read
MM_PLAN_CYCLES = 2
# ... and from the last slice's last read request to the cycle before the first result's write: the read's
# request register, the read, the bank's data and select registers, the hold register, the last slice's step
# and PE(0,0)'s last accumulate
MM_DRAIN_CYCLES = 3 + BANKED_READ_DELAY + BANKED_DATA_DELAY + BANKED_SELECT_DELAY
STREAM_MM_OVERHEAD = MM_PLAN_CYCLES + MM_DRAIN_CYCLES
CHECK_LATENCY = 4       # load-time validation: cycles from the host's write to the error code's write


def compute_read_latency(config):
    """Cycles from a compute-lane unit's scratchpad read request to its data: 1, plus the banked scratchpad's
    request, data and select registers in decoupled mode."""
    return 1 + (BANKED_READ_DELAY + BANKED_DATA_DELAY + BANKED_SELECT_DELAY if config.decoupled else 0)


def dma_read_latency(config):
    """Cycles from the DMA lane's scratchpad read request (ST, and the host's debug reads) to its data: 1, plus
    the banked scratchpad's request register in decoupled mode. It is also what an ST costs beyond its
    ``len`` cycles: each word goes to the external memory in the cycle it arrives."""
    return 1 + (BANKED_READ_DELAY if config.decoupled else 0)


def vector_read_latency(config):
    """Cycles from a vector-lane unit's (RQ, SM) scratchpad read request to its data: the compute lanes' latency,
    plus the announce register in decoupled mode (``PORT_B_ANNOUNCE``)."""
    return compute_read_latency(config) + (PORT_B_ANNOUNCE if config.decoupled else 0)


def rq_latency(config):
    """Cycles from an RQ element's read request to its result: ``RQ_DEPTH``, plus the banked scratchpad's
    registers and the announce register in decoupled mode."""
    return RQ_DEPTH + vector_read_latency(config) - 1


def sm_overhead(config):
    """The SM's busy time beyond its ``3 * len`` cycles: ``SM_OVERHEAD``, plus the cycles the banked scratchpad's
    registers and the announce register add to its reads in decoupled mode."""
    return SM_OVERHEAD + vector_read_latency(config) - 1
