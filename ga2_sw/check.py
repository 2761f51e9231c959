"""Batch invariance: the oracle of the batched decode builder.

At every step, each sequence's output and K/V cache rows must equal what the same sequence gives when it
is decoded ALONE; every sequence decoded alone must equal the plain-Python integer reference (invariance is
blind to a bug that the batch and the single run share); and a RAGGED batch (sequences at different
lengths in one step) must pass the same comparison, since a bug that confuses one sequence's length with
another's is invisible when all lengths are equal."""

import itertools
import random
import struct

from . import decode as dec
from .machine import Machine

__all__ = ["check_batching", "ragged_lengths", "machine_runner", "junk_scratchpad", "DEFAULT_LENGTHS", "DEFAULT_SEEDS"]

DEFAULT_LENGTHS = (1, 2, 5, 9, 16)
DEFAULT_SEEDS = (0, 1)
_RAGGED_BASE = (3, 9, 1, 14, 6, 12, 2, 16, 5, 10, 7, 15, 4, 11, 8, 13)


def ragged_lengths(config):
    """Lengths of the ragged batch: the chapter's (3, 9, 1, 14) on a 4-row array, extended or cut to
    ``rows`` sequences and folded into 1..max_ctx."""
    base = _RAGGED_BASE * (1 + config.rows // len(_RAGGED_BASE))
    return tuple((t - 1) % config.max_ctx + 1 for t in base[:config.rows])


def junk_scratchpad(config, seed):
    """Scratchpad contents a program must not depend on: a real chip keeps whatever the last program left,
    so the check runs every program on junk rather than on zeros (a builder that reads a row it never wrote
    would pass on zeros)."""
    raw = random.Random(seed).randbytes(4 * config.sp_words)
    return list(struct.unpack(f"<{config.sp_words}I", raw))


def machine_runner(config):
    """A runner on the reference machine: (program, ext) -> ext after the program, run on a junk
    scratchpad; raises on a fault."""
    m = Machine(config)
    calls = itertools.count()

    def run(prog, ext):
        r = m.run(prog, ext, junk_scratchpad(config, next(calls)))
        if not r.ok:
            raise RuntimeError(f"program faulted with {r.error.name} at pc {r.pc}")
        return r.ext
    return run


def _compare(config, problems, where, w, b, t, ext_batch, ext_alone, exact):
    if dec.outputs(config, ext_batch, b) != dec.outputs(config, ext_alone, b):
        problems.append(f"{where}: sequence {b} output differs from decoding it alone")
    if dec.caches(config, ext_batch, b) != dec.caches(config, ext_alone, b):
        problems.append(f"{where}: sequence {b} cache rows differ from decoding it alone")
    if exact and dec.outputs(config, ext_alone, b) != dec.int_reference(w, b, t):
        problems.append(f"{where}: sequence {b} decoded alone differs from the integer reference")


def require_chapter_path(config, what):
    """ValueError unless ``config`` decodes on the chapter's path (no online unit): ``what`` checks that path's
    builder against its integer reference."""
    if config.online_unit:
        raise ValueError(f"{what} checks the chapter's decode path; a chip with the online unit (--online-unit 1, "
                         f"as the long chip has) decodes over streamed caches, whose "
                         f"steps tests/test_online_unit.py holds to their own reference")


def check_batching(config, batches=None, lengths=DEFAULT_LENGTHS, seeds=DEFAULT_SEEDS, ragged=True, exact=True,
                   runner=None, progress=None):
    """Run the invariance check; return the list of problems (empty when the builder is right).

    ``runner(program, ext) -> ext`` executes a program (default: the reference machine); pass another to run
    the whole check on a simulator of the RTL. ``progress(n)`` is called after each program."""
    require_chapter_path(config, "check-batching")
    run = runner or machine_runner(config)
    tick = progress or (lambda n: None)
    batches = range(1, config.rows + 1) if batches is None else batches
    problems = []
    for nseq in batches:
        for L in (L for L in lengths if L <= config.max_ctx):
            for seed in seeds:
                w = dec.make_workload(config, nseq, L, 7000 + 31 * nseq + 5 * L + seed)
                P = dec.rq_params(w)
                seqs = list(range(nseq))
                ext_batch = dec.ext_image(w)
                ext_alone = [list(ext_batch) for _ in seqs]
                for t in range(1, L + 1):
                    ext_batch = run(dec.program(config, seqs, [t] * nseq, P), ext_batch)
                    tick(1)
                    for b in seqs:
                        ext_alone[b] = run(dec.program(config, [b], [t], P), ext_alone[b])
                        tick(1)
                        _compare(config, problems, f"B={nseq} L={L} seed={seed} step {t}", w, b, t,
                                 ext_batch, ext_alone[b], exact)
    if ragged:
        lens = ragged_lengths(config)
        for seed in seeds:
            w = dec.make_workload(config, len(lens), max(lens), 9100 + seed)
            P = dec.rq_params(w)
            seqs = list(range(len(lens)))
            ext = dec.ext_image(w)
            for b in seqs:                       # bring each sequence to the step before its ragged one
                for t in range(1, lens[b]):
                    ext = run(dec.program(config, [b], [t], P), ext)
                    tick(1)
            ext_batch = run(dec.program(config, seqs, list(lens), P), ext)
            tick(1)
            for b in seqs:
                ext_alone = run(dec.program(config, [b], [lens[b]], P), ext)
                tick(1)
                _compare(config, problems, f"ragged {lens} seed={seed}", w, b, lens[b], ext_batch, ext_alone, exact)
    return problems
