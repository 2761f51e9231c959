"""The project's one mutation framework: mutants, their outcomes, a parallel runner and the two oracles.

A ``Mutant`` is one text substitution (``old`` -> ``new``, ``old`` occurring exactly once) in one ``file`` of
a tree. ``check(mutant, oracle)`` applies it to a fresh COPY of the oracle's tree and lets the oracle judge
the copy in a subprocess (the tree itself is never touched); ``run`` does that for many (mutant, oracle)
pairs in parallel. The two oracles:

* ``BatchInvariance`` -- the batched decode builder's check (``ga2_sw.check``, batch invariance) on a copy of
  the ``ga2_sw`` package; mutants of ``decode.py`` and ``layout.py`` (``ga2_sw/mutants.py``, ``ga2 mutants``);
* ``PytestFiles`` -- a selection of the project's test files on a copy of the repository; mutants of the RTL
  (``sim/rtl_mutants.py``, ``ga2 mutants --rtl``).

Outcomes (the vocabulary of both, said here once):

=============  ========================================================================================
caught         the oracle reports a difference; ``detail`` says which (the check's first problem, or
               ``fault: ...`` when the mutated program crashed the check; the first failing test id)
timeout        no verdict within the oracle's timeout: a hang. Reported apart, but counted as a kill
survived       the oracle passes: it cannot tell the mutant from the original
equivalent     survived, and the mutant states why (``why_survives``): a verdict, see ``verdict``
broken         the mutant was never judged: its anchor does not occur exactly once (``bad anchor``) or the
               mutated tree cannot be built (it does not import, its tests cannot be collected). Counted
               apart, never as caught
=============  ========================================================================================

A baseline is the check of ``None``, the unmutated copy: no verdict means anything unless it survives."""

import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

__all__ = ["Mutant", "Outcome", "CAUGHT", "TIMEOUT", "SURVIVED", "EQUIVALENT", "BROKEN", "BAD_ANCHOR", "FAULT",
           "verdict", "mutate", "check_anchors", "apply", "check", "run", "Oracle", "BatchInvariance",
           "PytestFiles", "PACKAGE_DIR"]

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

CAUGHT, TIMEOUT, SURVIVED, EQUIVALENT, BROKEN = "caught", "timeout", "survived", "equivalent", "broken"
BAD_ANCHOR = "bad anchor"       # a broken mutant: its anchor does not occur exactly once (status of its Outcome)
FAULT = "fault: "               # detail prefix of a caught mutant whose program crashed the check
KILLS = (CAUGHT, TIMEOUT)
NOT_JUDGED = (BROKEN, BAD_ANCHOR)


@dataclass(frozen=True)
class Mutant:
    label: str
    file: str                   # relative to the oracle's tree: "decode.py" in ga2_sw, "ga2_hdl/matrix/pe.py" in the repo
    old: str                    # must occur exactly once in the file
    new: str
    why_survives: str = ""      # for a mutant expected to survive: why (equivalent, or a hole of the oracle)


@dataclass(frozen=True)
class Outcome:
    status: str                 # CAUGHT, TIMEOUT, SURVIVED, BROKEN or BAD_ANCHOR (see the module docstring)
    detail: str = ""            # what caught it, why it is broken, ...
    seconds: float = 0.0
    log_tail: str = ""          # the last lines of the oracle's output, when it has any worth keeping

    @property
    def caught(self):
        """A kill: caught, or a timeout."""
        return self.status in KILLS

    @property
    def broken(self):
        """Never judged: a bad anchor, or a mutated tree that cannot be built."""
        return self.status in NOT_JUDGED


def verdict(mutant, outcome):
    """The outcome's status, except that a survivor whose mutant states why it survives is EQUIVALENT."""
    if outcome.status == SURVIVED and mutant is not None and mutant.why_survives:
        return EQUIVALENT
    return outcome.status


# -- applying ----------------------------------------------------------------------------------------

def mutate(mutant, root):
    """The mutated text of the mutant's file under ``root``; ValueError when its anchor does not occur
    exactly once."""
    with open(os.path.join(root, mutant.file)) as f:
        text = f.read()
    n = text.count(mutant.old)
    if n != 1:
        raise ValueError(f"bad anchor: {mutant.old!r} occurs {n} times in {mutant.file}, not once")
    return text.replace(mutant.old, mutant.new)


def check_anchors(mutants, root):
    """``(label, problem)`` for every mutant whose anchor does not occur exactly once, or whose substitution
    does nothing; also duplicate labels."""
    problems, seen = [], set()
    for m in mutants:
        if m.label in seen:
            problems.append((m.label, "duplicate label"))
        seen.add(m.label)
        if m.old == m.new:
            problems.append((m.label, "the substitution changes nothing"))
        try:
            mutate(m, root)
        except (ValueError, OSError) as exc:
            problems.append((m.label, str(exc)))
    return problems


def apply(mutant, root, dest, ignore=None, text=None):
    """Copy the tree ``root`` to ``dest`` (``ignore``: a shutil.ignore_patterns) with the mutant applied
    (None: unmutated; ``text``: its already mutated file text). Raises ValueError on a bad anchor."""
    if mutant is not None and text is None:
        text = mutate(mutant, root)
    shutil.copytree(root, dest, ignore=ignore)
    if mutant is not None:
        with open(os.path.join(dest, mutant.file), "w") as f:
            f.write(text)
    return dest


# -- judging -----------------------------------------------------------------------------------------

class Oracle:
    """What judges a mutated copy. A subclass sets ``root`` (the tree mutants apply to), ``copy_name`` (the
    copy's directory name inside its temporary directory), ``ignore`` and ``timeout``, and implements
    ``judge(mutant, copy, tmp)``: run on the copy (``_run`` runs a subprocess) and return an Outcome
    (``seconds`` is filled in by ``check``)."""
    root = PACKAGE_DIR
    copy_name = "tree"
    ignore = staticmethod(shutil.ignore_patterns("__pycache__"))
    timeout = 900.0

    def judge(self, mutant, copy, tmp):
        raise NotImplementedError

    def _run(self, cmd, cwd, env=None, merge_output=False):
        """``(returncode, stdout, stderr)`` of a subprocess, or None after ``timeout`` seconds. It runs in a
        process group of its own, killed whole on a timeout (with whatever it started: Verilator harnesses).
        ``env``: variables to set on top of ours, or to remove (value None)."""
        full = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        for key, value in (env or {}).items():
            if value is None:
                full.pop(key, None)
            else:
                full[key] = value
        proc = subprocess.Popen(cmd, cwd=cwd, env=full, stdout=subprocess.PIPE, text=True, start_new_session=True,
                                stderr=subprocess.STDOUT if merge_output else subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, 9)
            except OSError:
                pass
            proc.communicate()
            return None
        return proc.returncode, out, err or ""


def check(mutant, oracle):
    """Apply ``mutant`` (None: none, the baseline) to a fresh copy of ``oracle.root`` and let the oracle
    judge it: an Outcome."""
    start = time.perf_counter()
    try:
        text = mutate(mutant, oracle.root) if mutant is not None else None
    except (ValueError, OSError) as exc:
        return Outcome(BAD_ANCHOR, str(exc))
    with tempfile.TemporaryDirectory(prefix="ga2_mutant_") as tmp:
        copy = apply(mutant, oracle.root, os.path.join(tmp, oracle.copy_name), oracle.ignore, text)
        o = oracle.judge(mutant, copy, tmp)
    return Outcome(o.status, o.detail, time.perf_counter() - start, o.log_tail)


def run(tasks, jobs=1, report=None, progress=True, unit="mutant"):
    """``check`` every ``(mutant, oracle)`` of ``tasks``, ``jobs`` at a time (threads: the work runs in
    subprocesses), started in the order given; the Outcomes in that order. ``report(mutant, oracle,
    outcome)`` may return a line to print as each one finishes; a tqdm progress bar (stderr) is shown when
    ``progress`` and stderr is a terminal."""
    from tqdm import tqdm
    tasks = list(tasks)
    results = [None] * len(tasks)
    with tqdm(total=len(tasks), unit=unit, file=sys.stderr, disable=not progress or None, dynamic_ncols=True,
              leave=False) as bar, concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(check, m, oracle): i for i, (m, oracle) in enumerate(tasks)}
        for fut in concurrent.futures.as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            line = report(*tasks[i], results[i]) if report else None
            if line:
                bar.write(line, file=sys.stdout)
                sys.stdout.flush()
            bar.update(1)
    return results


# -- oracle 1: the batched builder's batch-invariance check ----------------------------------------------

# Runs inside the mutated copy: the check in pieces (ragged batch first, then one batch size and length at
# a time), stopping at the first problem. Together the pieces are exactly check_batching's full run.
_CHILD = r"""
import os, sys
try:
    import ga2_sw, ga2_sw.decode, ga2_sw.layout
except Exception as exc:
    print(f"the mutated package does not import: {type(exc).__name__}: {exc}"); sys.exit(4)
assert os.path.dirname(os.path.abspath(ga2_sw.__file__)) == os.path.abspath("ga2_sw"), ga2_sw.__file__
import json
from ga2_sw.check import check_batching, DEFAULT_LENGTHS
from ga2_sw.config import Config
config, ragged = Config.from_dict(json.loads(sys.argv[1])), sys.argv[2] == "1"
pieces = [dict(batches=[], ragged=True)] if ragged else []
pieces += [dict(batches=[n], lengths=[L], ragged=False) for L in DEFAULT_LENGTHS for n in range(1, config.rows + 1)]
for kw in pieces:
    problems = check_batching(config, **kw)
    if problems:
        print(problems[0]); sys.exit(3)
"""


class BatchInvariance(Oracle):
    """``ga2_sw.check.check_batching`` run by the mutated copy of the ``ga2_sw`` package on itself (with or
    without the ragged batch). Caught: the check reports a problem (its first), or the mutated program
    crashes it (``fault: `` and the exception); broken: the mutated package does not import."""
    copy_name = "ga2_sw"

    def __init__(self, config=None, ragged=True, root=PACKAGE_DIR, timeout=900):
        from .config import Config
        self.config, self.ragged, self.root, self.timeout = config or Config(), ragged, root, timeout

    def judge(self, mutant, copy, tmp):
        r = self._run([sys.executable, "-c", _CHILD, self.config.to_json(), "1" if self.ragged else "0"], cwd=tmp)
        if r is None:
            return Outcome(TIMEOUT, f"no verdict after {self.timeout:g} s")
        code, out, err = r
        last = (out.strip().splitlines() or err.strip().splitlines() or [""])[-1]
        if code == 0:
            return Outcome(SURVIVED)
        if code == 3:
            return Outcome(CAUGHT, last)
        if code == 4:
            return Outcome(BROKEN, last)
        err = err.strip().splitlines()
        return Outcome(CAUGHT, FAULT + (err[-1] if err else f"exit status {code}"))


# -- oracle 2: a selection of the project's tests ------------------------------------------------------

_FAILED = re.compile(r"^(FAILED|ERROR) (.+?)(?: - .*)?$")


def _first_failure(output):
    for line in output.splitlines():
        hit = _FAILED.match(line)
        if hit:
            return hit.group(1), hit.group(2)
    return None, None


class PytestFiles(Oracle):
    """pytest on a selection of test files in the mutated copy of a repository, stopping at the first
    failure (``-x``). ``files`` is the selection in the order to run, or a function of the mutant (None:
    the baseline) that gives it; files missing from the copy are skipped. Caught: a test fails (the first failing test id);
    broken: pytest stops without a failing test (collection error, internal error)."""
    copy_name = "repo"
    # version control, caches, build products
    ignore = staticmethod(shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".hypothesis", "*.egg-info",
                                                 "build", "out", ".cache", "*.vcd", "*.fst"))

    def __init__(self, root, files, timeout=900, extra_args=()):
        self.root, self.files, self.timeout, self.extra_args = root, files, timeout, tuple(extra_args)

    def judge(self, mutant, copy, tmp):
        files = self.files(mutant) if callable(self.files) else self.files
        files = [f for f in files if os.path.exists(os.path.join(copy, f))]
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rfE", "--tb=short",
               # The project's own -W error::DeprecationWarning, minus one warning that is not the project's:
               # on a Hypothesis failure, its report imports libcst -> mypy_extensions, whose deprecation
               # warning then turns the failure into a pytest INTERNALERROR without the failing test's id.
               "-o", "addopts=-W error::DeprecationWarning",
               "-W", "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning", *self.extra_args, *files]
        # each copy its own Verilator cache: a mutant's Verilog never hits the user's cache, nor fills it
        env = {"GA2_CACHE": os.path.join(tmp, "ga2-cache"), "PYTEST_XDIST_WORKER": None, "PYTEST_ADDOPTS": None}
        r = self._run(cmd, copy, env, merge_output=True)
        if r is None:
            return Outcome(TIMEOUT, f"no verdict after {self.timeout:g} s")
        code, out, _ = r
        if code == 0:
            return Outcome(SURVIVED, "", 0, "\n".join(out.strip().splitlines()[-3:]))
        kind, test = _first_failure(out)
        lines = [line for line in out.strip().splitlines() if line.strip()]
        tail = "\n".join(lines[-25:])
        if test is None:
            last = lines[-1] if lines else ""
            if re.search(r"\b\d+ failed\b", last):
                # A test failed but its id is not in the summary (pytest reported an internal error after it).
                failed = [line for line in lines if " FAILED" in line or line.startswith("FAILED")]
                return Outcome(CAUGHT, failed[0] if failed else f"a test failed (id not reported): {last}", 0, tail)
            return Outcome(BROKEN, f"pytest exit status {code}: {last}", 0, tail)
        if kind == "ERROR" and "collect" in out.lower() and "::" not in test:
            return Outcome(BROKEN, f"collection error in {test}", 0, tail)
        return Outcome(CAUGHT, test, 0, tail)
