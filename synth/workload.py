"""Cycles of the batched decode step (B = rows, all at token max_ctx) for a square array, and the memory
sizes it needs."""

from ga2_sw.config import Config
from ga2_sw.cycles import cycle_counts
from ga2_sw.decode import traffic
from ga2_sw.layout import Layout
from ga2_sw.workloads import decode_table_programs

__all__ = ["SWEEP_MAX_BANKS", "sweep_config", "decode_step", "verilator_check"]


def _pow2(n):
    p = 1
    while p < n:
        p *= 2
    return p


# Decoupled, a sweep row has a scratchpad bank per operand port of the array (2n) up to this many. Every bank is
# a block RAM with its own row address, write data and read data, and each reaches every operand port, so the
# crossbar grows with banks x ports: with 16 banks router1 did not converge on the 8 x 8 (seed 1: 66,621 of 120,744
# arcs unrouted after 1,900 s on an LFE5U-45F, 79,795 after 626 s on an 85F, docs/SYNTH.md), while 16 banks buy it
# 2 cycles of the batched step's 5,416 (16 x 16: 2 of 9,909 with 16, 3 with 32). Below 8 they do cost: the 4 x 4
# takes 3,261 cycles on 4 banks, 3,105 on 8.
SWEEP_MAX_BANKS = 8


def sweep_config(n, **overrides):
    """Config(rows=n, cols=n) with sp_words, ext_words and imem_words sized (powers of two) for the batched
    decode step of n sequences: the scratchpad layout's sp_needed, the weights and n external sequence blocks,
    and the program length; and, decoupled, a scratchpad bank per operand port of the array up to
    ``SWEEP_MAX_BANKS`` (sp_banks the power of two at least 2n, at least 4 and at most 8: 4, 8, 8, 8 for n = 2,
    4, 8, 16), so that a slice's operands are read in as few cycles as the banks allow."""
    probe = Config(rows=n, cols=n, sp_words=65536, ext_words=65536, imem_words=65536, **overrides)
    if probe.decoupled and "sp_banks" not in overrides:
        probe = probe.replace(sp_banks=min(SWEEP_MAX_BANKS, max(4, _pow2(2 * n))))
    lay = Layout(probe)
    sp = max(64, _pow2(lay.sp_needed))
    ext = max(64, _pow2(lay.ex_w_words + n * lay.ex_seq_words))
    prog = decode_table_programs(probe, batches=[n])[0].program
    imem = max(64, _pow2(len(prog) + 1))
    return probe.replace(sp_words=sp, ext_words=ext, imem_words=imem)


def verilator_check(config):
    """Run the batched decode step on the generated Verilog in Verilator and compare memory and all five
    counters with the reference machine (and the cycles with ``cycle_counts``). None when Verilator cannot
    run here; else {"matches": bool, "cycles": n}."""
    from sim.backends import get_backend
    from sim.compare import compare_results
    from ga2_sw.machine import Machine
    verilator = get_backend("verilator")
    if verilator.unavailable_reason():
        return None
    p = decode_table_programs(config, batches=[config.rows])[0]
    r = verilator.run(config, p.program, p.ext)
    expect = Machine(config).run(p.program, p.ext)
    counters, _, _ = cycle_counts(p.program, config)
    matches = not compare_results(expect, r) and r.counters == counters
    return {"matches": matches, "cycles": r.counters.cycles}


def decode_step(config):
    """Cycle and traffic figures of the batched decode step at B = rows, from ``cycle_counts``."""
    p = decode_table_programs(config, batches=[config.rows])[0]
    counters, err, pc = cycle_counts(p.program, config)
    if err.name != "NONE":
        raise RuntimeError(f"the batched decode step faults with {err.name} at pc {pc} on {config}")
    macs, words = traffic(p.program)
    peak = config.rows * config.cols
    ceiling = min(peak, macs / words)
    achieved = macs / counters.cycles
    return {"batch": p.batch, "cycles_per_step": counters.cycles, "cycles_per_token": counters.cycles / p.batch,
            "macs": macs, "words": words, "mac_per_cycle": achieved, "ceiling_mac_per_cycle": ceiling,
            "pct_of_ceiling": 100 * achieved / ceiling, "instructions": counters.instructions}
