"""Chip programs of the GA-2 path's steps, so that the numpy path (``ga2_path``) can be held to the reference
machine and the simulators on real data: for now one head's projection (MM over weight tiles streamed from
external memory, then RQ), the step whose integer result the model keeps (the value cache). The attention's
programs (the online softmax of docs/LONG_CONTEXT.md on the online unit) are ``ga2_sw.llm.chip_steps``'s."""

from dataclasses import replace

from ..isa import halt, ld, mm, rq, st
from ..numerics import u32

__all__ = ["projection_config", "projection_program"]


def projection_config(config, rows, cols):
    """``config`` with external memory for a ``rows`` x ``cols`` weight matrix, its input and its outputs."""
    need = cols + rows * cols + rows
    ext = 1 << max(need - 1, 1).bit_length()
    return replace(config, ext_words=max(config.ext_words, ext))


def projection_program(config, w8, x8, m, s):
    """``sat8(requant(W x))`` of int8 ``w8`` (rows x cols, rows a multiple of the array's rows) and ``x8``
    (cols): returns (program, ext image, ext address of the outputs). External memory holds x, then W row by
    row, then room for the outputs; the scratchpad x, one tile of ``config.rows`` weight rows (loaded, then
    multiplied: MM M = rows of the tile, K = cols, N = 1) and the int32 sums, which one RQ turns into int8 in
    place before the ST."""
    rows, cols = len(w8), len(x8)
    R = config.rows
    if rows % R:
        raise ValueError(f"projection_program: {rows} weight rows are not a multiple of the array's {R} rows")
    tile, sums = cols, cols + R * cols
    if sums + rows > config.sp_words:
        raise ValueError(f"projection_program: {sums + rows} scratchpad words needed, the chip has {config.sp_words}")
    w_at, out_at = cols, cols + rows * cols
    if out_at + rows > config.ext_words:
        raise ValueError(f"projection_program: {out_at + rows} external words needed, the chip has {config.ext_words}")
    ext = [u32(int(v)) for v in x8] + [u32(int(v)) for row in w8 for v in row]
    program = [ld(0, 0, cols)]
    for t in range(0, rows, R):
        program += [ld(tile, w_at + t * cols, R * cols),
                    mm(sums + t, A=tile, B=0, M=R, K=cols, N=1, lda=cols, ldb=1, ldc=1)]
    program += [rq(sums, sums, rows, int(m), int(s)), st(sums, out_at, rows), halt()]
    return program, ext, out_at
