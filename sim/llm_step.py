"""SmolLM2's whole decode step on a simulator of the chip (``ga2 llm generate --sim``): every matrix product as
the step's own programs (``ga2_sw.llm.whole_step.linear_pieces``, the programs ``ga2 llm throughput`` times) with
the model's int8 weights and the batch's input digits, and the attention of the batch's sequences as the chip's
grouped attention program, scheduled as the step schedules it. Each program's stored results are held to numpy's
integers and its counters to the cycle model's; the model continues from the simulator's results.

The model computes one sequence at a time (``Ga2Model.step``); ``Lockstep`` runs a step's sequences in threads
that meet at every product and attention, where the last to arrive runs the one program for all of them: the
batch's programs, as the chip runs a step.

A harness returns only the bytes a program stores its results in (``Job.ext_window``): on the llm chip a product's
outputs are a few kilobytes of a 4 MiB external memory."""

import dataclasses
import threading

import numpy as np

from ga2_sw.llm.whole_step import (RESCORE, SCHEDULE, SCHEDULE_WINDOW, Product, linear_image, linear_pieces,
                                   output_window, program_counters, step_numerics, window_outputs)
from ga2_sw.online_program import grouped_outputs
from ga2_sw.schedule import reorder

from .backends import get_backend
from .jobs import Job
from .llm_attention import ChipMismatch

__all__ = ["ChipProducts", "ChipStepAttention", "Tally", "Lockstep", "on_simulator"]


class Tally:
    """What ran on the simulator: programs and their cycles, by kind."""

    def __init__(self):
        self.programs, self.cycles = {}, {}

    def add(self, kind, counters):
        self.programs[kind] = self.programs.get(kind, 0) + 1
        self.cycles[kind] = self.cycles.get(kind, 0) + counters.cycles

    @property
    def total_programs(self):
        return sum(self.programs.values())

    @property
    def total_cycles(self):
        return sum(self.cycles.values())


def _check_counters(got, program, config, where):
    predicted, err = program_counters(tuple(program), config)
    if not got.ok or err:
        raise ChipMismatch(f"{where}: the program stopped with {got.error!r} (the cycle model: {err!r})")
    if got.counters != predicted:
        raise ChipMismatch(f"{where}: the counters differ from the cycle model's ({got.counters} against "
                           f"{predicted})")


class ChipProducts:
    """``Ga2Model.products``: a product's int32 sums from its programs on ``sim`` (one harness run for all of a
    product's pieces), each piece's stored sums equal to numpy's exact integer product and its counters to the
    cycle model's, else ``ChipMismatch``."""

    def __init__(self, sim, config, tally=None):
        if not step_numerics(config)[1]:
            raise ValueError("the whole step's products on a simulator need a chip that stores int32 sums "
                             "(st_words = 1: the llm chip)")
        self.sim, self.config, self.backend = sim, config, get_backend(sim)
        self.tally = tally or Tally()

    def __call__(self, kind, w8, rows, where):
        return self.batch(kind, w8, [rows], where)[0]

    def gathered(self, kind, items, where):
        """The sums of each sequence's ``(w8, rows)``: one program for the batch whose weights are all the
        sequences' own rows (the LM head's candidates, ``RESCORE``: each sequence its own, even where two
        sequences' are alike) or the rows they share (every other product), each sequence taking the sums of
        its own rows."""
        weights = [w for w, _ in items]
        if kind != RESCORE:
            return self.batch(kind, weights[0], [rows for _, rows in items], where)
        sums = self.batch(kind, np.concatenate(weights), [rows for _, rows in items], where)
        ends = np.cumsum([0] + [len(w) for w in weights])
        return [s[:, a:e] for s, a, e in zip(sums, ends, ends[1:])]

    def batch(self, kind, w8, inputs, where):
        """The sums of each sequence's input rows ``inputs[n]`` (digits, columns): one program a piece for the
        whole batch, a sequence's digit rows next to each other."""
        w8 = np.asarray(w8).astype(np.int64)
        rows = np.concatenate([np.asarray(x, dtype=np.int64) for x in inputs])
        A, cols = rows.shape
        pieces = linear_pieces(self.config, len(inputs), Product(kind, w8.shape[0], cols), digits=A // len(inputs))
        jobs = [Job(list(program), linear_image(w8[first:first + n], rows, self.config), dump_sp=False,
                    ext_window=output_window(n, cols, A, self.config, sums=True))
                for first, n, program in pieces]
        results = self.backend.run_many(self.config, jobs)
        out = np.zeros((A, w8.shape[0]), dtype=np.int64)
        for (first, n, program), got in zip(pieces, results):
            at = f"{self.sim}: {where}, rows {first}..{first + n - 1}"
            _check_counters(got, program, self.config, at)
            sums = window_outputs(got.ext_window[1], self.config, A, n, sums=True)
            if not np.array_equal(sums, rows @ w8[first:first + n].T):
                raise ChipMismatch(f"{at}: the stored sums differ from numpy's integer product")
            out[:, first:first + n] = sums
            self.tally.add(kind, got.counters)
        return np.split(out, len(inputs))


class _Window:
    """A harness's window of external memory read like the whole memory (``ext[a:b]`` inside the window)."""

    def __init__(self, first, words):
        self.first, self.words = first, words

    def __getitem__(self, s):
        return self.words[s.start - self.first:s.stop - self.first]


def step_heads(step, kv_heads):
    """The part of an attention ``Step`` that key/value heads ``kv_heads`` (a range) and their query heads make:
    each key/value head's attention is its own."""
    q = slice(kv_heads.start * step.group, kv_heads.stop * step.group)
    kv = slice(kv_heads.start, kv_heads.stop)
    return dataclasses.replace(step, q8=step.q8[q], K8=step.K8[kv], V8=step.V8[kv], score=step.score[q],
                               norm=step.norm[q], out8=step.out8[q], fine=step.fine[q] if step.fine else step.fine,
                               fine8=None if step.fine8 is None else step.fine8[q])


class ChipStepAttention:
    """``Ga2Model.chip`` on the step's chip: a block's attention steps (one for each sequence of the batch) as the
    grouped attention program scheduled as ``whole_step`` schedules the step's, on ``sim``; its int8 outputs
    (both readings) must equal the path's and its counters the cycle model's, else ``ChipMismatch``."""

    def __init__(self, sim, config, tally=None):
        self.sim, self.config, self.backend = sim, config, get_backend(sim)
        self.tally = tally or Tally()

    def __call__(self, step):
        return self.batch([step])[0]

    def batch(self, steps):
        """Each step's (out8, fine8): the steps (one block of each sequence) in one program, or in halves where
        they do not fit the chip, and a step that does not fit alone by halves of its key/value heads (as
        ``whole_step.attention_pieces`` splits a step's)."""
        from ga2_sw.layout import LayoutError
        from ga2_sw.llm.chip_steps import programs
        try:
            [(program, ext, lay, _)] = programs(steps, len(steps), self.config)
            fits = len(program) <= self.config.imem_words
        except LayoutError:
            fits = False
        if not fits:
            if len(steps) > 1:
                half = len(steps) // 2
                return self.batch(steps[:half]) + self.batch(steps[half:])
            kv = steps[0].K8.shape[0]
            if kv == 1:
                raise ValueError(f"the attention of one key/value head of a sequence at {steps[0].length} tokens "
                                 f"does not fit the chip")
            parts = [self.batch([step_heads(steps[0], heads)])[0] for heads in (range(kv // 2), range(kv // 2, kv))]
            return [tuple(None if parts[0][n] is None else np.concatenate([p[n] for p in parts]) for n in (0, 1))]
        program = reorder(program, self.config, SCHEDULE, window=SCHEDULE_WINDOW)
        ends = [at(g, h) for at in (lay.ex_out, lay.ex_fine) for g, grp in enumerate(lay.groups)
                if at == lay.ex_out or grp.fines for h in range(len(grp.scores))]
        first, last = min(ends), max(ends) + lay.d
        got = self.backend.run_many(self.config, [Job(program, ext, dump_sp=False,
                                                      ext_window=(first, last - first))])[0]
        where = f"{self.sim}: block {steps[0].block}, positions {', '.join(str(s.pos) for s in steps)}, attention"
        _check_counters(got, program, self.config, where)
        window = _Window(*got.ext_window)
        groups, fine_groups = grouped_outputs(lay, window), grouped_outputs(lay, window, fine=True)
        out, g = [], 0
        for step in steps:                  # a step's key/value heads are consecutive groups
            kv = step.K8.shape[0]
            out8 = np.array([row for group in groups[g:g + kv] for row in group])
            fine8 = np.array([row for group in fine_groups[g:g + kv] for row in group]) if step.fine else None
            g += kv
            if not np.array_equal(out8, step.out8) or (fine8 is not None and not np.array_equal(fine8, step.fine8)):
                raise ChipMismatch(f"{where}: the outputs of position {step.pos} differ from the GA-2 path's")
            out.append((out8, fine8))
        self.tally.add("attention", got.counters)
        return out


class Lockstep:
    """A step's sequences in threads, one each, that meet at every product and attention step (``meet``): the
    last to arrive runs the batch's program for all of them (``run(items)``, the items in the sequences' order,
    one result each) and each takes its own. A sequence that fails wakes the others, which stop too."""

    def __init__(self):
        self._cond = threading.Condition()
        self._slots, self._local = {}, threading.local()
        self._size, self._failed = 1, None

    def meet(self, key, item, run):
        me = getattr(self._local, "index", 0)
        with self._cond:
            slot = self._slots.setdefault(key, {"items": {}, "out": None, "taken": 0})
            slot["items"][me] = item
            if len(slot["items"]) == self._size:
                order = sorted(slot["items"])
                try:
                    slot["out"] = dict(zip(order, run([slot["items"][i] for i in order])))
                except Exception as exc:        # every sequence of the batch raises it
                    slot["out"] = exc
                self._cond.notify_all()
            while slot["out"] is None and self._failed is None:
                self._cond.wait()
            out = slot["out"]
            slot["taken"] += 1
            if slot["taken"] == self._size:
                del self._slots[key]
        if out is None:
            raise RuntimeError("another sequence of the step failed")
        if isinstance(out, Exception):
            raise out
        return out[me]

    def run(self, step, items):
        """``step(*item)`` of every item, each in its own thread meeting the others; the results in order (the
        first failure raised)."""
        self._size, self._failed, self._slots = len(items), None, {}
        if len(items) == 1:
            self._local.index = 0
            return [step(*items[0])]
        results, errors = [None] * len(items), {}

        def body(n, item):
            self._local.index = n
            try:
                results[n] = step(*item)
            except Exception as exc:
                errors[n] = exc
                with self._cond:
                    self._failed = self._failed or exc
                    self._cond.notify_all()
        threads = [threading.Thread(target=body, args=(n, item)) for n, item in enumerate(items)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise self._failed
        return results


def on_simulator(model, sim, config, tally=None):
    """Make the GA-2 path ``model`` (a ``Ga2Model``) run every step of a batch as ``config``'s programs on
    ``sim``, the batch's sequences together (``Lockstep``); the ``Tally`` of what runs."""
    tally = tally or Tally()
    products, attention, lock = ChipProducts(sim, config, tally), ChipStepAttention(sim, config, tally), Lockstep()
    one_step = model.step
    model.products = lambda kind, w8, rows, where: lock.meet(
        where, (w8, rows), lambda items: products.gathered(kind, items, where))
    model.chip = lambda step: lock.meet(f"blk.{step.block}.attention", step, attention.batch)
    model.step_batch = lambda items: lock.run(one_step, items)
    return tally
