"""The chapter's decode-table workloads: B = 1..rows sequences all at the last token, and the ragged batch,
each with the external memory its earlier steps left behind."""

from dataclasses import dataclass

from . import decode as dec
from .check import ragged_lengths
from .machine import Machine

__all__ = ["TableProgram", "decode_table_programs"]


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


def decode_table_programs(config, seed=4242, batches=None, lengths=None):
    """The decode-table programs for ``config``: B = 1..rows at token max_ctx, then the ragged batch; or, with
    ``lengths``, one batch of sequences at those lengths (each 1..max_ctx, at most rows of them)."""
    machine = Machine(config)
    if lengths is not None:
        lengths = tuple(lengths)
        if not 1 <= len(lengths) <= config.rows or not all(1 <= L <= config.max_ctx for L in lengths):
            raise ValueError(f"Lengths {list(lengths)}: one to {config.rows} (config field 'rows') of "
                             f"1..{config.max_ctx} (config field 'max_ctx')")
        w = dec.make_workload(config, len(lengths), max(lengths), seed)
        P = dec.rq_params(w)
        name = f"B={len(lengths)} lengths {lengths}" if len(set(lengths)) > 1 else \
            f"B={len(lengths)} (all at token {lengths[0]})"
        return [TableProgram(name, len(lengths), lengths,
                             dec.program(config, list(range(len(lengths))), list(lengths), P),
                             _prepared(config, w, P, lengths, machine))]
    L = config.max_ctx
    out = []
    for n in (batches or range(1, config.rows + 1)):
        w = dec.make_workload(config, n, L, seed)
        P = dec.rq_params(w)
        lengths = (L,) * n
        out.append(TableProgram(f"B={n} (all at token {L})", n, lengths,
                                dec.program(config, list(range(n)), list(lengths), P),
                                _prepared(config, w, P, lengths, machine)))
    lengths = ragged_lengths(config)
    w = dec.make_workload(config, len(lengths), max(lengths), seed + 101)
    P = dec.rq_params(w)
    out.append(TableProgram(f"B={len(lengths)} ragged {lengths}", len(lengths), lengths,
                            dec.program(config, list(range(len(lengths))), list(lengths), P),
                            _prepared(config, w, P, lengths, machine)))
    return out
