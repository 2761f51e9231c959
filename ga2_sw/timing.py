"""The chip's latencies, said once.

The cycle model (``cycles.py``) builds its busy-time formulas from these numbers, and every RTL unit imports
the ones it implements and asserts at elaboration that its pipeline has exactly that depth: change a pipeline
and the build fails until this file, the cycle model and docs/ISA.md say the same."""

from typing import NamedTuple

__all__ = ["FETCH_CYCLES", "ISSUE_CYCLES", "SP_WRITE_DELAY", "DEBUG_READ_LATENCY", "RQ_DEPTH", "DIVIDER_LATENCY",
           "SM_OVERHEAD", "STREAM_MM_OVERHEAD", "CHECK_LATENCY", "BANKED_READ_DELAY", "BANKED_DATA_DELAY",
           "BANKED_SELECT_DELAY", "MM_PLAN_CYCLES", "MM_DRAIN_CYCLES", "PORT_B_ANNOUNCE", "mm_write_cycles",
           "vector_read_latency",
           "compute_read_latency", "dma_read_latency", "AXI_ST_DATA_DELAY", "dma_data_at_banks", "st_latency",
           "debug_read_latency", "rq_latency", "sm_pass_cycles",
           "sm_overhead", "SMC_SCORE_DEPTH", "RSA_DEPTH", "NRM_DEPTH", "smc_busy", "rsa_busy", "nrm_busy", "smc_phases", "smc_reads",
           "OnlineSchedule", "online_schedule"]

FETCH_CYCLES = 1        # the first instruction's fetch
ISSUE_CYCLES = 2        # decode, check: paid by every instruction, HALT and the faulting one included
SP_WRITE_DELAY = 1      # a unit's write request is registered before it reaches the scratchpad
RQ_DEPTH = 5            # requantiser: read, register, partial products, product, shift, round/saturate/write
DIVIDER_LATENCY = 17    # the softmax divider: one quotient bit per stage (Q16 probabilities up to 65536)
SM_OVERHEAD = 4 + DIVIDER_LATENCY   # read, score register, ROM, buffer read, then the divider
# The host's debug reads (ga2_hdl.top): data two cycles after the address, in both modes, so the host protocol
# does not depend on the mode (in order the scratchpad reads in one cycle and the top level registers the word);
# three on a decoupled AXI4 chip, whose DMA lane's port of the banks (which the debug reads share) registers
# its data at the banks (``debug_read_latency``).
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


def mm_write_cycles(M, N, config):
    """Cycles from an M x N tile's first possible write to its last, plus one, with nothing in the way (decoupled):
    one result a cycle in row-major order (PE(i, j) finishes ``i + j`` cycles after PE(0, 0), never later than
    its turn), ``M * N``; with ``row_writes`` a row a cycle, each row once its last PE, PE(i, N - 1), is done,
    the first ``N - 1`` cycles after PE(0, 0): ``N - 1 + M``."""
    return N - 1 + M if config.row_writes else M * N


def compute_read_latency(config):
    """Cycles from a compute-lane unit's scratchpad read request to its data: 1, plus the banked scratchpad's
    request, data and select registers in decoupled mode."""
    return 1 + (BANKED_READ_DELAY + BANKED_DATA_DELAY + BANKED_SELECT_DELAY if config.decoupled else 0)


def dma_read_latency(config):
    """Cycles from the DMA lane's scratchpad read request (ST, and the host's debug reads) to its data: 1, plus
    the banked scratchpad's request register in decoupled mode, plus its data register at the banks on a
    decoupled AXI4 chip (``dma_data_at_banks``). On the bare port it is also what an ST costs beyond its beats
    (``st_latency``): each word goes to the external memory in the cycle it arrives."""
    return (1 + (BANKED_READ_DELAY if config.decoupled else 0)
            + (AXI_ST_DATA_DELAY if dma_data_at_banks(config) else 0))


# The AXI4 DMA registers the words an ST reads from the scratchpad before they go to W or into its queue: from
# the banks' block RAMs (their slow clock-to-output), through the select among the banks, into the queue's LUT
# RAM was the AXI chip's critical path (88.38 MHz median on the 25F at 4 bytes a beat). An ST on an AXI chip
# takes a cycle more. In order the register is the DMA's, after the one memory's read; decoupled it is at the
# banks, before the select among them: registered after the select, the block RAMs' clock-to-output (about
# 5 ns of the ECP5's DP16KD), the routes to the DMA lane's lanes and a 32-way select were the AXI chip's next
# long path (`bank4.DOB7` -> `dma.read_words`, 10.43 ns, 6.54 of them logic; 95.84 MHz on a 25F).
AXI_ST_DATA_DELAY = 1


def dma_data_at_banks(config):
    """Whether the DMA lane's port of the banks registers the data each bank reads (``AXI_ST_DATA_DELAY``, moved
    from after the select to the banks): a decoupled AXI4 chip's."""
    return bool(config.decoupled and config.axi)


def st_latency(config):
    """What an ST costs beyond its beats: the DMA lane's read latency (``dma_read_latency``), plus the AXI4
    DMA's data register (``AXI_ST_DATA_DELAY``) on a chip with ``axi`` = 1 where the banks do not hold it.
    Each beat goes to the external memory in the cycle its data is ready."""
    return dma_read_latency(config) + (AXI_ST_DATA_DELAY if config.axi and not dma_data_at_banks(config) else 0)


def debug_read_latency(config):
    """Cycles from the host's debug read address to its data: ``DEBUG_READ_LATENCY``, or the DMA lane's read
    latency where that is longer (a decoupled AXI4 chip, whose port A registers the banks' data)."""
    return max(DEBUG_READ_LATENCY, dma_read_latency(config))


def vector_read_latency(config):
    """Cycles from a vector-lane unit's (RQ, SM) scratchpad read request to its data: the compute lanes' latency,
    plus the announce register in decoupled mode (``PORT_B_ANNOUNCE``)."""
    return compute_read_latency(config) + (PORT_B_ANNOUNCE if config.decoupled else 0)


def rq_latency(config):
    """Cycles from an RQ element's read request to its result: ``RQ_DEPTH``, plus the banked scratchpad's
    registers and the announce register in decoupled mode."""
    return RQ_DEPTH + vector_read_latency(config) - 1


def sm_pass_cycles(length, config):
    """Cycles each of the softmax's two reading passes (the max pass, the exp pass) takes over ``length``
    scores: one a score, or with ``Config.sm_lanes`` = 2 one a pair, ``ceil(length / 2)``. The divide pass
    writes one quotient a cycle whatever the lanes, so SM is busy ``2 * sm_pass_cycles + length +
    sm_overhead`` cycles."""
    return -(-length // config.sm_lanes)


def sm_overhead(config):
    """The SM's busy time beyond its ``3 * len`` cycles: ``SM_OVERHEAD``, plus the cycles the banked scratchpad's
    registers and the announce register add to its reads in decoupled mode."""
    return SM_OVERHEAD + vector_read_latency(config) - 1


# The online unit (ga2_hdl/vector/online_unit.py: SMC, RSA, NRM) reads everything an instruction reads, then writes, one
# scratchpad access per cycle: no read and write of one cycle can meet on a bank. Its pipelines' depths, from a
# read's data to the value it makes (each unit stage registered; the word register in front of the shared
# 32 x 18 multiplier, its two partial products and their sum, then the instruction's own stages):
SMC_SCORE_DEPTH = 5     # word, partials, product, shifted, score (clamped to 16 bits, into the buffer)
RSA_DEPTH = 4           # word, partials, product, the rescaled sum (into the buffer)
NRM_DEPTH = 15          # word, partials, product, numerator, shifted, clamp flags, 8 quotient bits, int8


def smc_reads(n, wide=False):
    """The scores' reads of an SMC of ``n`` scores: one a score, or with ``ws`` (``wide``) two, its high plane's
    word then its low plane's."""
    return 2 * n if wide else n


def smc_phases(n, config, wide=False):
    """Cycles (from the start pulse) of an SMC of ``n`` scores: ``(first weight-pass cycle P0, busy time)``.
    Reads st, st+1 in cycles 1, 2 and the scores in 3 .. R+2 (``R = smc_reads(n, wide)``: with ``ws`` score i's
    high word in 3 + 2i, its low word in 4 + 2i, the two added as the low one's data arrives); the last score
    enters the buffer in cycle R + 2 + L + SMC_SCORE_DEPTH; the new maximum is registered in the next cycle,
    alpha's table read the next, alpha registered the next; the weights pass reads the buffer from P0 on: the
    high digit of weight i is written in cycle P0 + 3 + i, the low digit in P0 + n + 4 + i, then M', S' and alpha
    in P0 + 2n + 4 .. + 6."""
    first_pass = smc_reads(n, wide) + 2 + vector_read_latency(config) + SMC_SCORE_DEPTH + 4
    return first_pass, first_pass + 2 * n + 6


def smc_busy(n, config, wide=False):
    """SMC's busy time: ``3 n + L + SMC_SCORE_DEPTH + 12``, ``n`` more with ``ws`` (``smc_phases``)."""
    return smc_phases(n, config, wide)[1]


def rsa_busy(n, config):
    """RSA's busy time: alpha read in cycle 1, element j's three words in cycles 2 + 3j .. 4 + 3j, its sum in
    the buffer RSA_DEPTH cycles after the last one's data; the buffer then read from the next cycle on, one word
    written per cycle: ``4 n + L + RSA_DEPTH + 2``."""
    return 4 * n + vector_read_latency(config) + RSA_DEPTH + 2


def nrm_busy(n, config):
    """NRM's busy time: S read in cycle 1, the partials in 2 .. n + 1, each int8 in the buffer NRM_DEPTH cycles
    after its data; then written one per cycle: ``2 n + L + NRM_DEPTH + 2``."""
    return 2 * n + vector_read_latency(config) + NRM_DEPTH + 2


class OnlineSchedule(NamedTuple):
    """The online unit's schedule at ``n`` = 0, from which each instruction's adds multiples of ``n``: SMC's
    first weight-pass cycle and busy time (``smc_phases``), RSA's and NRM's busy times. The unit is built with
    it and asserts that its pipelines take these cycles."""
    smc_first_pass: int
    smc: int
    rsa: int
    nrm: int


def online_schedule(config):
    """The :class:`OnlineSchedule` of ``config``'s chip."""
    return OnlineSchedule(*smc_phases(0, config), rsa_busy(0, config), nrm_busy(0, config))
