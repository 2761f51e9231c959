"""What every simulator backend shares: the job, the default cycle limit, the errors, and the two harness
backends' (Verilator, Icarus) job-file format and result parsing (docs/SIMULATORS.md, "Job files").

A ``Job`` is one program run: the program (``Instr`` objects or 128-bit words), the external-memory and
scratchpad images, the cycle limit, and what to bring back. ``as_job`` accepts a ``Job``, a
``(program, ext, sp, cycle_limit)`` tuple (any prefix of it) or a dict. ``check_job`` validates a job against
a configuration like the reference machine does.

The Verilator harness and the Icarus testbench read the same job files (``write_jobs``) and print the same
result blocks (``parse_results``), so both backends use the code here; their build caches use ``sim.cache``."""

import array
import sys
from dataclasses import dataclass

from ga2_sw.asm import to_words
from ga2_sw.cycles import Counters
from ga2_sw.isa import Err, INSTR_BITS
from ga2_sw.machine import Result
from ga2_sw.options import Hang, ToolMissing
from ga2_sw.packing import held_image

__all__ = ["Session", "DEFAULT_CYCLE_LIMIT", "HangError", "SimulatorError", "SimulatorMissing", "Job", "as_job",
           "check_job", "hang_message", "write_header", "write_job", "write_jobs", "parse_result_block", "make_result",
           "parse_results", "window_of", "windowed", "FORMAT_VERSION", "SECONDS_PER_WORD", "BATCH_WORDS", "harness_timeout", "batch_for"]

# The cycle limit of every simulator when the caller gives none: far above any program of this project
# (a decode step is 2-10 k cycles), and a hung pysim run still ends in minutes.
DEFAULT_CYCLE_LIMIT = 5_000_000

FORMAT_VERSION = 3

# A harness process loads and clears both memories for every job and prints them (only the external window
# where a job names one, and the scratchpad only where it asks): on the llm chip (4 M external and 64 K
# scratchpad words) a job printed whole is about 1.5 s, 0.35 us a word, whatever the program. Its time limit
# allows each job ten times that a word beside its cycle limit, so a loaded machine is not taken for a stuck
# harness; and a batch holds at most BATCH_WORDS words of memory, so that its printed results stay a few hundred
# megabytes at most.
SECONDS_PER_WORD = 4e-6
BATCH_WORDS = 20_000_000


def harness_timeout(jobs, config, *, start_seconds, cycles_per_second, seconds_per_word=SECONDS_PER_WORD):
    """Seconds a harness process may take for ``jobs`` before it counts as stuck: ``start_seconds``, each
    job's cycle limit at ``cycles_per_second``, and its two memories at ``seconds_per_word`` a word."""
    words = len(jobs) * (config.ext_words + config.sp_words)
    return start_seconds + sum(j.cycle_limit for j in jobs) / cycles_per_second + words * seconds_per_word


def batch_for(config, most=200):
    """Jobs to give one harness process on ``config``: ``most``, fewer where the memories are large."""
    return max(1, min(most, BATCH_WORDS // (config.ext_words + config.sp_words)))


class Session:
    """Base of the simulator sessions (``sim.backends``): a session holds what it built or started for one
    configuration until ``close()``, and is a context manager. Subclasses provide ``run``, and ``run_many``
    where they run a batch otherwise than one job after another."""

    def run_many(self, jobs, *, on_hang="raise"):
        """``jobs`` (``Job`` objects or tuples, ``as_job``) one after another through ``run``, every job's
        external window checked before the first runs; each result as a harness returns it (``windowed``)."""
        jobs = [as_job(j) for j in jobs]
        for j in jobs:
            window_of(j, self.config)
        return [windowed(self.run(j.program, j.ext, j.sp, j.cycle_limit, on_hang=on_hang), j, self.config)
                for j in jobs]

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class HangError(Hang):
    """The program did not halt within the cycle limit."""


class SimulatorError(RuntimeError):
    """The simulator could not be built or its harness failed."""


class SimulatorMissing(SimulatorError, ToolMissing):
    """The simulator (or a tool it builds with) is not installed: exit status 4 of the commands."""


def hang_message(limit, pc, cycles):
    """The one wording of a hang, on every simulator."""
    return f"program did not halt within {limit:,} cycles (pc={pc}, cycles counter={cycles})"


@dataclass
class Job:
    """One program run: the program (Instr objects or 128-bit words), the external-memory and scratchpad
    images (the rest of each memory is zero), the cycle limit, and what to bring back."""
    program: list
    ext: list = None
    sp: list = None
    cycle_limit: int = DEFAULT_CYCLE_LIMIT
    reset: bool = True
    dump_ext: bool = True
    dump_sp: bool = True
    ext_window: tuple = None    # (first word, words): the part of the external memory returned; all by default


def as_job(item, cycle_limit=None):
    """A ``Job`` from a Job, a dict or a ``(program, ext, sp, cycle_limit)`` tuple (or a prefix of it; a bare
    program is a job too). ``cycle_limit`` is the limit of a job that does not name one."""
    if isinstance(item, Job):
        return item
    extra = {} if cycle_limit is None else {"cycle_limit": cycle_limit}
    if isinstance(item, dict):
        return Job(**{**extra, **item})
    if isinstance(item, (tuple, list)) and item and isinstance(item[0], (list, tuple)):
        job = Job(*item)
        if len(item) < 4 and cycle_limit is not None:
            job.cycle_limit = cycle_limit
        return job
    return Job(list(item), **extra)


def check_job(job, config):
    """Validate ``job`` against ``config`` (ValueError naming the problem); the program's words."""
    words = to_words(job.program)
    if len(words) > config.imem_words:
        raise ValueError(f"Program has {len(words)} instructions but instruction memory holds {config.imem_words}")
    for n, w in enumerate(words):
        if not isinstance(w, int) or not 0 <= w < (1 << INSTR_BITS):
            raise ValueError(f"Program word {n} must be a {INSTR_BITS}-bit unsigned integer, not {w!r}")
    for image, size, what in ((job.ext, config.ext_words, "External memory"), (job.sp, config.sp_words, "Scratchpad")):
        image = image or []
        if len(image) > size:
            raise ValueError(f"{what} image has {len(image)} words but the memory holds {size}")
        for n, w in enumerate(image):
            if not isinstance(w, int) or not 0 <= w <= 0xFFFFFFFF:
                raise ValueError(f"{what} image word {n} must be a 32-bit unsigned integer, not {w!r}")
    if not isinstance(job.cycle_limit, int) or job.cycle_limit < 1:
        raise ValueError(f"Cycle limit must be a positive integer, not {job.cycle_limit!r}")
    window_of(job, config)
    return words


def window_of(job, config):
    """``(first word, words)`` of the external memory ``job`` returns: its ``ext_window``, or the whole memory
    (ValueError for a window that is not a pair of counts inside the memory)."""
    if job.ext_window is None:
        return 0, config.ext_words
    try:
        first, count = (int(v) for v in job.ext_window)
    except (TypeError, ValueError):
        raise ValueError(f"External window must be (first word, words), not {job.ext_window!r}") from None
    if not 0 <= first <= config.ext_words or not 0 <= count <= config.ext_words - first:
        raise ValueError(f"External window {first}, {count} words must lie in the memory's {config.ext_words} words")
    return first, count


def windowed(result, job, config):
    """A run's result as a harness returns it for ``job``: with an ``ext_window``, ``ext`` None and
    ``ext_window`` = ``(first word, the words there)``. For the sessions that hold the whole memory."""
    if job.ext_window is not None and result.ext is not None:
        first, count = window_of(job, config)
        result.ext, result.ext_window = None, (first, list(result.ext[first:first + count]))
    return result


# -- job files (docs/SIMULATORS.md) ------------------------------------------------------------------------

def _trim(image):
    image = list(image or [])
    n = len(image)
    while n and image[n - 1] == 0:
        n -= 1
    return image[:n]


def write_header(config):
    # sp_banks 0: the in-order chip's one scratchpad memory; otherwise the banks of ga2_sw/banking.py.
    return (f"ga2jobs {FORMAT_VERSION} ext_words {config.ext_words} sp_words {config.sp_words} "
            f"sp_banks {config.sp_banks if config.decoupled else 0} "
            f"imem_words {config.imem_words} ext_latency {config.ext_latency}\n")


def write_job(index, job, config):
    """One job of a job file (docs/SIMULATORS.md)."""
    words = check_job(job, config)
    ext, sp = _trim(held_image(job.ext, config)), _trim(job.sp)
    dump = (1 if job.dump_ext else 0) | (2 if job.dump_sp else 0)
    first, count = window_of(job, config)
    parts = [f"job {index} limit {job.cycle_limit} reset {int(bool(job.reset))} dump {dump} "
             f"window {first} {count}\n",
             f"prog {len(words)}\n"]
    parts += [f"{w:032x}\n" for w in words]
    parts.append(f"ext {len(ext)}\n")
    parts.append(" ".join(f"{w:x}" for w in ext) + ("\n" if ext else ""))
    parts.append(f"sp {len(sp)}\n")
    parts.append(" ".join(f"{w:x}" for w in sp) + ("\n" if sp else ""))
    parts.append("end\n")
    return "".join(parts)


def write_jobs(jobs, config):
    """A whole job file for ``jobs`` (Job objects)."""
    return write_header(config) + "".join(write_job(i, j, config) for i, j in enumerate(jobs))


# -- result files ------------------------------------------------------------------------------------------

_WORDS_PER_LINE = 16


def _hex_words(lines, n):
    """Words printed as 8 hex digits each, 16 to a line -> list of ints (fast path through bytes.fromhex)."""
    text = "".join(lines).replace(" ", "")
    try:
        if len(text) != 8 * n:
            raise ValueError
        arr = array.array("I", bytes.fromhex(text))
        if sys.byteorder == "little":
            arr.byteswap()
        return arr.tolist()
    except ValueError:
        tokens = " ".join(lines).split()
        try:
            words = [int(t, 16) for t in tokens]
        except ValueError:
            bad = next(t for t in tokens if not all(c in "0123456789abcdefABCDEF" for c in t))
            raise SimulatorError(f"Harness output holds a non-binary word {bad!r} (X or Z in the design?)") from None
        if len(words) != n:
            raise SimulatorError(f"Harness output: expected {n} words, got {len(words)}")
        return words


def parse_result_block(lines, pos):
    """Parse one ``result ... end`` block starting at lines[pos]; return (index, fields dict, ext, sp, pos)."""
    head = lines[pos].split()
    if not head or head[0] != "result":
        raise SimulatorError(f"Malformed harness output: expected 'result', got {lines[pos][:80]!r}")
    index = int(head[1])
    kv = dict(zip(head[2::2], head[3::2]))
    pos += 1
    mems = {}
    for name in ("ext", "sp"):
        hdr = lines[pos].split()
        if hdr[0] != name:
            raise SimulatorError(f"Malformed harness output: expected {name!r}, got {lines[pos][:80]!r}")
        n = int(hdr[1])
        pos += 1
        nlines = (n + _WORDS_PER_LINE - 1) // _WORDS_PER_LINE
        mems[name] = _hex_words(lines[pos:pos + nlines], n) if n else None
        pos += nlines
    if lines[pos].strip() != "end":
        raise SimulatorError(f"Malformed harness output: expected 'end', got {lines[pos][:80]!r}")
    return index, kv, mems["ext"], mems["sp"], pos + 1


def make_result(kv, ext, sp, limit, on_hang, window=None):
    """A ``Result`` from one result block's fields; ``HangError`` for a hung run unless ``on_hang="return"``."""
    counters = Counters(int(kv["cycles"]), int(kv["mm"]), int(kv["dma"]), int(kv["vec"]), int(kv["instr"]),
                        int(kv["stall"]))
    try:
        error = Err(int(kv["error"]))
    except ValueError:
        error = int(kv["error"])                   # a code the ISA does not define: keep it visible
    pc = int(kv["pc"])
    if kv["status"] == "hang" and on_hang == "raise":
        raise HangError(hang_message(limit, pc, counters.cycles))
    result = Result(None if window else ext, sp, counters, error, pc)
    if window:
        result.ext_window = (int(window[0]), ext or [])
    result.sim_cycles = int(kv["sim_cycles"])
    result.seconds = float(kv["seconds"])
    result.cpu_seconds = float(kv.get("cpu_seconds", kv["seconds"]))
    result.hang = kv["status"] == "hang"
    result.ext_oob = int(kv.get("ext_oob", 0))
    result.sp_port_mismatch = int(kv.get("sp_port_mismatch", 0))
    result.start_wait = int(kv.get("start_wait", 0))
    return result


def parse_results(text, jobs, on_hang="raise"):
    """The harness's result file -> list of Result (one per job, in order)."""
    lines = text.splitlines()
    if not lines or lines[0].split()[:1] != ["ga2results"]:
        raise SimulatorError(f"Malformed harness output (no 'ga2results' header): {text[:200]!r}")
    results, pos = [], 1
    while pos < len(lines) and lines[pos].startswith("result"):
        index, kv, ext, sp, pos = parse_result_block(lines, pos)
        if index != len(results):
            raise SimulatorError(f"Harness results out of order: got job {index}, expected {len(results)}")
        job = jobs[index]
        results.append(make_result(kv, ext, sp, job.cycle_limit, on_hang, job.ext_window))
    if len(results) != len(jobs):
        raise SimulatorError(f"Harness returned {len(results)} results for {len(jobs)} jobs")
    return results
