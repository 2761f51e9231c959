"""The cocotb test that runs GA-2 programs on the generated Verilog of a chip with an AXI4 port (``axi = 1``)
against cocotbext-axi's ``AxiRam``: a memory model nobody here wrote, with random pauses on every channel.

Run by ``sim/axi_cocotb.py`` inside the simulator (Verilator or Icarus through cocotb's runner), never imported
by the rest of the project. The jobs come from the JSON file ``$GA2_AXI_JOBS`` (``{"config", "pause",
"seed", "jobs": [{"program": [hex words], "ext": [elements], "cycle_limit"}]}``) and the results go to
``$GA2_AXI_RESULTS``: per job the six counters, error, pc, a hang flag, and both memories (the external one as
elements, read back from the ``AxiRam``; the scratchpad through the debug port)."""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge
from cocotbext.axi import AxiBus, AxiRam

from ga2_hdl.ports import COUNTERS
from ga2_sw.config import Config
from ga2_sw.packing import beat_bytes, element_bytes
from ga2_sw.timing import debug_read_latency


def pauses(rng, probability):
    """A pause generator for one channel: True (hold the channel) with ``probability`` in each cycle."""
    while True:
        yield rng.random() < probability


def image_bytes(elements, config):
    """The bytes of an external-memory image: each element a little-endian 32-bit word, or one byte packed."""
    size = element_bytes(config)
    return b"".join((e & ((1 << (8 * size)) - 1)).to_bytes(size, "little") for e in elements)


def elements_of(data, config):
    size = element_bytes(config)
    return [int.from_bytes(data[i:i + size], "little") for i in range(0, len(data), size)]


async def run_job(dut, ram, config, job):
    """One job, every input driven and every output read at a falling edge (half a cycle from the rising edges
    at which the chip samples and updates)."""
    host = {name: getattr(dut, f"host__{name}") for name in
            ("start", "done", "running", "error", "pc", "imem_we", "imem_addr", "imem_data", *COUNTERS)}
    nbytes = config.ext_words * element_bytes(config)
    ram.write(0, image_bytes(job["ext"] + [0] * (config.ext_words - len(job["ext"])), config))
    await FallingEdge(dut.clk)
    dut.rst.value = 1
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    words = [int(w, 16) for w in job["program"]]
    for addr in range(config.imem_words):          # the program, then zeros over a previous job's words
        await FallingEdge(dut.clk)
        host["imem_we"].value = 1
        host["imem_addr"].value = addr
        host["imem_data"].value = words[addr] if addr < len(words) else 0
    await FallingEdge(dut.clk)
    host["imem_we"].value = 0
    host["start"].value = 1
    await FallingEdge(dut.clk)
    host["start"].value = 0
    cycles, running_seen, hang = 0, False, False
    while True:
        running_seen |= bool(int(host["running"].value))
        if running_seen and int(host["done"].value):
            break
        if cycles >= job["cycle_limit"]:
            hang = True
            break
        await FallingEdge(dut.clk)
        cycles += 1
    result = {"counters": [int(host[name].value) for name in COUNTERS], "error": int(host["error"].value),
              "pc": int(host["pc"].value), "hang": hang}
    # The scratchpad through the debug port: the word of an address debug_read_latency cycles later.
    sp, latency = [], debug_read_latency(config)
    for addr in range(config.sp_words + latency):
        await FallingEdge(dut.clk)
        if addr >= latency:
            sp.append(int(dut.debug__data.value))
        dut.debug__addr.value = min(addr, config.sp_words - 1)
    result["sp"] = sp
    result["ext"] = elements_of(ram.read(0, nbytes), config)
    return result


@cocotb.test()
async def run_jobs(dut):
    spec = json.loads(open(os.environ["GA2_AXI_JOBS"]).read())
    config = Config.from_dict(spec["config"])
    assert config.axi, "the jobs are for a chip with an AXI4 port"
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    for name in ("start", "imem_we"):
        getattr(dut, f"host__{name}").value = 0
    dut.debug__addr.value = 0
    # The subordinate's outputs start at 0: AxiRam drives some only once a transaction needs them (under
    # Icarus an undriven rid or rresp is X, and an X on rvalid would spread through the chip).
    for name in ("arready", "rid", "rdata", "rresp", "rlast", "rvalid", "awready", "wready", "bid", "bresp",
                 "bvalid"):
        getattr(dut, f"ext__{name}").value = 0
    size = 1 << max(12, (config.ext_words * element_bytes(config) - 1).bit_length())
    ram = AxiRam(AxiBus.from_prefix(dut, "ext_"), dut.clk, dut.rst, size=size)
    assert len(dut.ext__wdata) == 8 * beat_bytes(config)
    rng = random.Random(spec["seed"])
    if spec["pause"]:
        for channel in (ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel,
                        ram.read_if.ar_channel, ram.read_if.r_channel):
            channel.set_pause_generator(pauses(random.Random(rng.random()), spec["pause"]))
    results = []
    for job in spec["jobs"]:
        results.append(await run_job(dut, ram, config, job))
    with open(os.environ["GA2_AXI_RESULTS"], "w") as f:
        json.dump(results, f)
