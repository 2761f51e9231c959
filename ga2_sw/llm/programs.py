"""Chip programs of the GA-2 path's steps, so that the numpy path (``ga2_path``) can be held to the reference
machine and the simulators on real data: for now one head's projection (MM over weight tiles streamed from
external memory: the int32 sums of the input's digit rows, or with one int8 row and an RQ the value cache's
int8). The attention's
programs (the online softmax of docs/LONG_CONTEXT.md on the online unit) are ``ga2_sw.llm.chip_steps``'s."""

from dataclasses import replace

import numpy as np

from ..isa import halt, ld, mm, rq, st
from ..numerics import u32

__all__ = ["projection_config", "projection_program"]


def projection_config(config, rows, cols, digits=1):
    """``config`` with external memory for a ``rows`` x ``cols`` weight matrix, its input (``digits`` rows) and
    its outputs."""
    need = digits * cols + rows * cols + digits * rows
    ext = 1 << max(need - 1, 1).bit_length()
    return replace(config, ext_words=max(config.ext_words, ext))


def projection_program(config, w8, x8, m=None, s=None):
    """``W x`` of int8 ``w8`` (rows x cols, rows a multiple of the array's rows) and each int8 row of ``x8``
    (digits x cols, or one row of cols): returns (program, ext image, ext address of the outputs). External
    memory holds x (cols x digits, the digits of an element side by side), then W row by row, then room for the
    outputs (rows x digits, int32); the scratchpad x, one tile of ``config.rows`` weight rows (loaded, then
    multiplied: MM M = rows of the tile, K = cols, N = digits) and the int32 sums. With ``m`` and ``s`` (one
    row of x) an RQ turns the sums into int8 in place before the ST: ``sat8(requant(W x))``."""
    x8 = np.atleast_2d(np.asarray(x8))
    digits, cols = x8.shape
    rows, R = len(w8), config.rows
    if rows % R:
        raise ValueError(f"projection_program: {rows} weight rows are not a multiple of the array's {R} rows")
    if m is not None and digits != 1:
        raise ValueError("projection_program: the RQ takes the sums of one input row")
    tile, sums = digits * cols, digits * cols + R * cols
    if sums + digits * rows > config.sp_words:
        raise ValueError(f"projection_program: {sums + digits * rows} scratchpad words needed, the chip has "
                         f"{config.sp_words}")
    w_at, out_at = digits * cols, digits * cols + rows * cols
    if out_at + digits * rows > config.ext_words:
        raise ValueError(f"projection_program: {out_at + digits * rows} external words needed, the chip has "
                         f"{config.ext_words}")
    ext = [u32(int(v)) for v in x8.T.reshape(-1)] + [u32(int(v)) for row in w8 for v in row]
    program = [ld(0, 0, digits * cols)]
    for t in range(0, rows, R):
        program += [ld(tile, w_at + t * cols, R * cols),
                    mm(sums + t * digits, A=tile, B=0, M=R, K=cols, N=digits, lda=cols, ldb=digits, ldc=digits)]
    if m is not None:
        program.append(rq(sums, sums, rows, int(m), int(s)))
    program += [st(sums, out_at, digits * rows), halt()]
    return program, ext, out_at
