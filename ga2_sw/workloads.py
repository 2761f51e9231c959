"""The chapter's decode-table workloads: B = 1..rows sequences all at the last token, and the ragged batch,
each with the external memory its earlier steps left behind."""

from dataclasses import dataclass

from . import decode as dec
from .check import ragged_lengths
from .machine import Machine

__all__ = ["TableProgram", "decode_table_count", "decode_table_programs"]


@dataclass
class TableProgram:
    name: str
    batch: int
    lengths: tuple
    program: list
    ext: list          # external memory before the step


def _prepared(config, w, P, lengths, machine):
    """External memory after every sequence has decoded the tokens before its length."""
    ext = dec.ext_image(w)
    if len(set(lengths)) == 1:                    # lock-step: the batch decodes its earlier steps together
        seqs = list(range(len(lengths)))
        for t in range(1, lengths[0]):
            ext = machine.run(dec.program(config, seqs, [t] * len(seqs), P), ext).ext
    else:
        for b, L in enumerate(lengths):
            for t in range(1, L):
                ext = machine.run(dec.program(config, [b], [t], P), ext).ext
    return ext


def _batch(config, name, lengths, seed, machine, key_digits=1):
    """One decode step of sequences 0..B-1 at ``lengths``, on a workload of seed ``seed``, with the external
    memory its earlier steps left behind."""
    w = dec.make_workload(config, len(lengths), max(lengths), seed)
    P = dec.rq_params(w, key_digits)
    seqs = list(range(len(lengths)))
    if config.online_unit:          # the caches the earlier steps leave, written directly (thousands of steps)
        from .online_decode import ext_image
        ext = ext_image(w, P, seqs, list(lengths), key_digits)
    else:
        ext = _prepared(config, w, P, lengths, machine)
    return TableProgram(name, len(lengths), lengths, dec.program(config, seqs, list(lengths), P, key_digits), ext)


def decode_table_count(config, batches=None, lengths=None):
    """How many programs ``decode_table_programs`` builds: one batch of ``lengths``, or each of ``batches``
    (1..rows by default) and the ragged batch."""
    return 1 if lengths is not None else len(batches or range(1, config.rows + 1)) + 1


def decode_table_programs(config, seed=4242, batches=None, lengths=None, key_digits=1, progress=None):
    """The decode-table programs for ``config``: B = 1..rows at token max_ctx, then the ragged batch; or, with
    ``lengths``, one batch of sequences at those lengths (each 1..max_ctx, at most rows of them); keys of
    ``key_digits`` int8 digits (2: wide keys, long-context steps only). ``progress()`` is called as each
    program is built (seconds each at 4,096 tokens)."""
    tick = progress or (lambda: None)
    machine = Machine(config)
    if lengths is not None:
        lengths = tuple(lengths)
        if not 1 <= len(lengths) <= config.rows or not all(1 <= L <= config.max_ctx for L in lengths):
            raise ValueError(f"Lengths {list(lengths)}: one to {config.rows} (config field 'rows') of "
                             f"1..{config.max_ctx} (config field 'max_ctx')")
        name = f"B={len(lengths)} lengths {lengths}" if len(set(lengths)) > 1 else \
            f"B={len(lengths)} (all at token {lengths[0]})"
        shapes = [(name, lengths, seed)]
    else:
        L, ragged = config.max_ctx, ragged_lengths(config)
        shapes = [(f"B={n} (all at token {L})", (L,) * n, seed) for n in (batches or range(1, config.rows + 1))]
        shapes.append((f"B={len(ragged)} ragged {ragged}", ragged, seed + 101))
    out = []
    for name, shape, shape_seed in shapes:
        out.append(_batch(config, name, shape, shape_seed, machine, key_digits))
        tick()
    return out
