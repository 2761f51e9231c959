"""Mutation testing of the batch-invariance check (``ga2 mutants``).

Each mutant is one text substitution in a COPY of the ``ga2_sw`` package (in ``decode.py``, the batched
builder, or ``layout.py``, its memory layout). The copy's own ``check_batching`` then runs in a separate
Python process, once with the full check and once without the ragged batch: ``ga2_sw.mutation`` (the
project's one mutation framework) applies, runs and judges, with its ``BatchInvariance`` oracle; its module
docstring says what caught, timeout, survived, equivalent and broken mean. Here a mutant is *caught* when
the check reports a problem or the program faults; it *survives* when the check passes.

The first 16 mutants are the chapter's (all caught by the full check, 13 without the ragged batch: the
three that confuse one sequence's length with another's need sequences of different lengths in one step).
The rest are this project's own; the ones expected to survive carry the reason in ``why_survives``."""

import os
from dataclasses import dataclass

from . import mutation
from .mutation import Outcome, PACKAGE_DIR, BatchInvariance

__all__ = ["Mutant", "Outcome", "CHAPTER_MUTANTS", "OWN_MUTANTS", "ROW_B_MUTANTS", "ALL_MUTANTS", "NO_RAGGED_SURVIVORS",
           "mutate", "run_mutant", "run_mutants", "summarise"]


@dataclass(frozen=True)
class Mutant(mutation.Mutant):
    """A mutant of the batched builder: ``file`` is "decode.py" or "layout.py" of the ga2_sw package."""
    own: bool = False           # this project's own (else the chapter's)


def _c(label, old, new, file="decode.py"):
    return Mutant(label, file, old, new)


def _o(label, old, new, file="decode.py", why_survives=""):
    return Mutant(label, file, old, new, own=True, why_survives=why_survives)


_ONE_V_BLOCK = ("equivalent where the V cache is one block of d columns (Layout.v_block: in order, and on a "
                "row_b chip whose half blocks would not fill the array's rows); caught by the decoupled check "
                "(ga2 mutants --mode decoupled)")

_KC = "def KC(self, j):\n        return self.caches + 2 * self.cache_words * j\n"

CHAPTER_MUTANTS = (
    _c("projection runs on one row (M = 1) instead of the whole batch", "M=n, K=DM,", "M=1, K=DM,"),
    _c("projection results stored with row stride C (cols), not d", "ldb=DM if tw else D, ldc=D))",
       "ldb=DM if tw else D, ldc=C))"),
    _c("every new key is taken from row 0 of the projection", "src=lay.KA + j * D,", "src=lay.KA,"),
    _c("every new value is taken from row 0 of the projection", "src=lay.VA + j * D + c0,", "src=lay.VA + c0,"),
    _c("every sequence's cache lives in batch slot 0", _KC, "def KC(self, j):\n        return self.caches\n",
       file="layout.py"),
    _c("the value caches of all sequences overlap",
       "return self.caches + 2 * self.cache_words * j + self.cache_words",
       "return self.caches + self.cache_words * j + self.cache_words", file="layout.py"),
    _c("sequence j attends with the query of row 0", "A=lay.Q8 + j * D,", "A=lay.Q8,"),
    _c("hidden states are all loaded into slot 0", "dst=lay.X + j * DM,", "dst=lay.X,"),
    _c("every sequence reads the hidden state of sequence 0", "src=lay.ex_x(b)", "src=lay.ex_x(0)"),
    _c("outputs are all stored in sequence 0's output slot", "dst=lay.ex_out(b)", "dst=lay.ex_out(0)"),
    _c("the new key is appended at the first sequence's position", "r = (ts[j] - 1) * D", "r = (ts[0] - 1) * D"),
    _c("the V cache is loaded from the K cache in external memory", "src=lay.ex_vc(b) + v0,",
       "src=lay.ex_kc(b) + v0,"),
    _c("the new value is appended to the K cache in external memory", "dst=lay.ex_vc(b) + rv,",
       "dst=lay.ex_kc(b) + rv,"),
    _c("attention length of every sequence is the first sequence's", "L, buf = ts[j],", "L, buf = ts[0],"),
    _c("the q requantisation covers only one row", "src=lay.QA, len=n * D,", "src=lay.QA, len=D,"),
    _c("a sequence's K cache is loaded with the first sequence's length", "src=lay.ex_kc(b), len=(ts[j] - 1) * D",
       "src=lay.ex_kc(b), len=(ts[0] - 1) * D"),
)

# The chapter's mutants that only a ragged batch can catch.
NO_RAGGED_SURVIVORS = frozenset({
    "the new key is appended at the first sequence's position",
    "attention length of every sequence is the first sequence's",
    "a sequence's K cache is loaded with the first sequence's length",
})

OWN_MUTANTS = (
    _o("slots 2.. share slot 1's K cache", _KC,
       "def KC(self, j):\n        return self.caches + 2 * self.cache_words * min(j, 1)\n", file="layout.py"),
    _o("sequence b's K cache is read from sequence 0's in external memory", "src=lay.ex_kc(b), len=",
       "src=lay.ex_kc(0), len="),
    _o("the K cache is loaded one word short", "src=lay.ex_kc(b), len=(ts[j] - 1) * D",
       "src=lay.ex_kc(b), len=(ts[j] - 1) * D - 1"),
    _o("the K cache is loaded one row too long", "src=lay.ex_kc(b), len=(ts[j] - 1) * D",
       "src=lay.ex_kc(b), len=ts[j] * D",
       why_survives="equivalent in values: the extra row is the one this step appends, and the append "
                    "overwrites it before anything reads it; it moves d more words per sequence, which the "
                    "traffic test (1,312 .. 2,944 words) catches, not the invariance check"),
    _o("the V row of the new token is stored from the K cache slot", "src=lay.VC(j) + rv,", "src=lay.KC(j) + rv,"),
    _o("keys are requantised with the values' parameters", 'len=D, m=P["k"][0], s=P["k"][1]',
       'len=D, m=P["v"][0], s=P["v"][1]'),
    _o("scores multiply by K untransposed (tb=0)", "width=L, tb=1,", "width=L, tb=0,"),
    _o("score tiles step by one word instead of one cache row", "column_words=D, lda=D)", "column_words=1, lda=D)"),
    _o("scores are requantised for one element only", 'src=buf["S"], len=L,', 'src=buf["S"], len=1,'),
    _o("softmax over one element less", 'src=buf["S8"], len=L)', 'src=buf["S8"], len=L - 1)'),
    # Caught only because the check runs every program on a junk scratchpad: on zeros the extra cache rows
    # past the sequence's length would add nothing.
    _o("the output sums over d cache rows instead of the sequence's L (K = d)", "B=lay.VC(j) + v0, K=L,", "B=lay.VC(j) + v0, K=D,"),
    _o("the output is stored from the int32 accumulators", 'src=buf["O8"], dst=lay.ex_out(b)',
       'src=buf["O"], dst=lay.ex_out(b)'),
    # The V cache's column blocks (Layout.v_block): one block in order, so these are caught decoupled.
    _o("the second V-cache block is loaded over the first", "dst=lay.VC(j) + v0,", "dst=lay.VC(j),",
       why_survives=_ONE_V_BLOCK),
    _o("every block of the new value row takes the first block's columns", "src=lay.VA + j * D + c0,",
       "src=lay.VA + j * D,", why_survives=_ONE_V_BLOCK),
    _o("P V reads the V cache with the row stride d of one block", "tb=0, ldb=G,",
       "tb=0, ldb=D,", why_survives=_ONE_V_BLOCK),
    _o("hidden-state rows are read with stride d instead of d_model", "tb=tw, lda=DM, ldb=DM if tw else D,",
       "tb=tw, lda=D, ldb=DM if tw else D,",
       why_survives="equivalent under the default configuration, where d_model = d = 16; a hole of the "
                    "check's configuration: run it with d_model != d (ga2 mutants --d-model 8) to catch it"),
)

_ROW_B = ("equivalent on a chip built without row_b, whose attention takes a tile an MM (decode.column_tiles); "
          "caught on a row_b chip (ga2 mutants --mode decoupled --row-b 1 --sp-banks 32)")

# The attention's tiles a row of the array each on a row_b chip (MM's rb and sa: decode.column_tiles).
ROW_B_MUTANTS = (
    _o("a row_b chip's tile rows step one column instead of one tile", "lda=tile_words,", "lda=column_words,",
       why_survives=_ROW_B),
    _o("a row_b chip's tile rows read A's rows, not row 0's (sa dropped)", "ldc=C, rb=1, sa=1))",
       "ldc=C, rb=1, sa=0))", why_survives=_ROW_B),
    _o("a row_b chip's tile rows share row 0's tile (rb dropped)", "ldc=C, rb=1, sa=1))", "ldc=C, rb=0, sa=1))",
       why_survives=_ROW_B),
)

ALL_MUTANTS = CHAPTER_MUTANTS + OWN_MUTANTS + ROW_B_MUTANTS
# the mutants of the V-cache block code, which only the decoupled check can catch
V_BLOCK_MUTANTS = tuple(m for m in OWN_MUTANTS if m.why_survives is _ONE_V_BLOCK)


def mutate(mutant, package_dir=PACKAGE_DIR):
    """The mutated text of the mutant's file; ValueError when its anchor does not occur exactly once."""
    return mutation.mutate(mutant, package_dir)


def run_mutant(mutant, ragged=True, config=None, timeout=900, package_dir=PACKAGE_DIR):
    """Apply one mutant (None: none, the baseline) to a copy of the package and run the check on it in a
    subprocess (``mutation.BatchInvariance``): an Outcome."""
    return mutation.check(mutant, BatchInvariance(config, ragged, package_dir, timeout))


def run_mutants(mutants=ALL_MUTANTS, config=None, jobs=None, baseline=False, progress=False):
    """Both columns for every mutant, in parallel: a list of (mutant, full Outcome, no-ragged Outcome).

    With ``baseline``, the unmutated package's full check runs alongside, as a first row (None, outcome,
    outcome): every verdict means something only when it passes."""
    oracles = {ragged: BatchInvariance(config, ragged) for ragged in (True, False)}
    tasks = [(m, ragged) for ragged in (True, False) for m in mutants]
    # the checks expected to pass run the whole check: start them first so the short ones fill the gaps
    tasks.sort(key=lambda t: not (t[0].why_survives or (not t[1] and t[0].label in NO_RAGGED_SURVIVORS)))
    if baseline:
        tasks.insert(0, (None, True))
    outcomes = mutation.run([(m, oracles[ragged]) for m, ragged in tasks], jobs or os.cpu_count() or 1,
                            progress=progress, unit="check")
    results = dict(zip(tasks, outcomes))
    rows = [(m, results[(m, True)], results[(m, False)]) for m in mutants]
    return ([(None, results[(None, True)], results[(None, True)])] if baseline else []) + rows


def summarise(rows):
    """Counts and verdict of a run: a dict ready for JSON (see ``ga2 mutants --help``)."""
    def counts(sel):
        return {"full": sum(f.caught for _, f, _ in sel), "no_ragged": sum(n.caught for _, _, n in sel),
                "total": len(sel)}
    problems, base = [], None
    if rows and rows[0][0] is None:
        base, rows = rows[0][1], rows[1:]
        if base.status != "survived":
            problems.append(f"the UNMUTATED builder fails the check ({base.status}: {base.detail}): no verdict "
                            f"below means anything")
    chapter = [r for r in rows if not r[0].own]
    own = [r for r in rows if r[0].own]
    surviving = {m.label for m, _, n in chapter if not n.caught}
    for m, f, n in rows:
        for column, o in (("full check", f), ("no ragged batch", n)):
            if o.broken:
                problems.append(f"{m.label} ({column}): {o.status}: {o.detail}")
    for m, f, n in chapter:
        if not f.caught:
            problems.append(f"chapter mutant not caught by the full check: {m.label}")
    if len(chapter) == len(CHAPTER_MUTANTS) and surviving != NO_RAGGED_SURVIVORS:
        problems.append("without the ragged batch the chapter's survivors should be exactly: "
                        + "; ".join(sorted(NO_RAGGED_SURVIVORS)) + " (got: " + ("; ".join(sorted(surviving)) or "none") + ")")
    holes = [m.label for m, f, n in own if not f.caught and not m.why_survives]
    out = dict(counts(chapter))
    out["own"] = counts(own)
    out["mutants"] = [{"label": m.label, "own": m.own, "caught_full": f.caught, "caught_no_ragged": n.caught,
                       "full": f.status, "no_ragged": n.status, "detail_full": f.detail,
                       "detail_no_ragged": n.detail, "why_survives": m.why_survives} for m, f, n in rows]
    out["baseline"] = None if base is None else "passes" if base.status == "survived" else base.status
    out["unexplained_survivors"] = holes
    out["problems"] = problems
    return out
