"""Continuous batching of SmolLM2 on GA-2: requests join the running batch as slots free up and leave
it as they finish, each step one batched decode step of the chip, timed by the exact cycle model of the
programs the chip would run for it (docs/LLM.md, "Serving").

The schedule is iteration-level, as in Orca (Yu et al., OSDI 2022): every step advances every active request by
one token, the next token of its prompt while it reads the prompt, else the token it generated last; a request
joins at the first step with a free slot (at most ``max_batch``, the array's rows) at or after its arrival, in
arrival order, and leaves after the step that produced its last token (the end-of-turn token, or its
``max_tokens``-th). So the batch is ragged (each sequence at its own position) and changes from step to step.

Each sequence's numbers are its own: GA-2's batched programs compute every row of the batch as it would alone
(batch invariance, held by ``ga2 check-batching`` and tests/test_batching.py), so the numerics run one sequence
at a time on the host (``Ga2Model.step``, the chip's integer functions) and give exactly the tokens of a batched
run; the cycles are those of the batched programs (``StepCycles``)."""

from dataclasses import dataclass, field

__all__ = ["Request", "serve", "requests_from_prompts", "load_prompts", "MAX_PROMPTS"]


@dataclass
class Request:
    """One prompt to continue: its token ids, the step it arrives at, and what serving it produced."""
    id: int
    prompt: str
    tokens: list                    # the prompt's token ids
    max_tokens: int
    arrival: int = 0
    generated: list = field(default_factory=list)
    joined: int = None              # the step it joined at
    left: int = None                # the step after its last
    cache: object = None
    position: int = 0               # tokens it has run so far
    logits: object = None

    @property
    def done(self):
        return self.left is not None


def requests_from_prompts(model, prompts, max_tokens, arrival_gap=0):
    """Requests of ``prompts`` (texts), request ``n`` arriving at step ``n * arrival_gap``."""
    out = []
    for n, prompt in enumerate(prompts):
        tokens = model.encode(prompt)
        if not tokens:
            raise ValueError(f"prompt {n + 1} is empty once tokenised")
        out.append(Request(n, prompt, tokens, max_tokens, n * arrival_gap))
    return out


def serve(runner, requests, max_batch, stop, step_cycles=None, progress=None):
    """Run ``requests`` (``Request``) to completion with at most ``max_batch`` in a step; the steps as dicts
    ``{"step", "requests", "contexts", "joined", "left", ...}`` with ``step_cycles.step(contexts)``'s figures
    when ``step_cycles`` is given. ``runner``: a ``FloatModel`` or ``Ga2Model``; ``stop``: token ids that end a
    request (not kept)."""
    import numpy as np
    waiting = sorted(requests, key=lambda r: (r.arrival, r.id))
    active, steps, step = [], [], 0
    while waiting or active:
        joined = []
        while waiting and len(active) < max_batch and waiting[0].arrival <= step:
            r = waiting.pop(0)
            r.joined, r.cache = step, runner.new_cache()
            active.append(r)
            joined.append(r.id)
        if not active:                          # nobody has arrived yet: the chip idles until someone does
            step = waiting[0].arrival
            continue
        items = [(r.tokens[r.position] if r.position < len(r.tokens) else r.generated[-1], r.position, r.cache)
                 for r in active]
        for r, logits in zip(active, runner.step_batch(items)):
            r.logits = logits
            r.position += 1
        contexts = [r.position for r in active]     # the step attends over every token so far, this one included
        left = []
        for r in active:
            if r.position < len(r.tokens):
                continue
            nxt = int(np.argmax(r.logits))
            if nxt not in stop:
                r.generated.append(nxt)
            if nxt in stop or len(r.generated) >= r.max_tokens:
                r.left = step + 1
                left.append(r.id)
        record = {"step": step, "requests": [r.id for r in active], "contexts": contexts, "joined": joined,
                  "left": left}
        if step_cycles is not None:
            record.update(step_cycles.step(contexts))
        steps.append(record)
        active = [r for r in active if r.left is None]
        step += 1
        if progress:
            progress(record)
    return steps


MAX_PROMPTS = 64


def load_prompts(path, max_chars=4000):
    """The prompts of a file, one per line (blank lines and lines starting with ``#`` skipped); ValueError
    naming the file and line of anything wrong."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    prompts = []
    for n, line in enumerate(lines, start=1):
        text = line.rstrip("\r")
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        if len(text) > max_chars:
            raise ValueError(f"{path}, line {n}: a prompt of {len(text):,} characters; at most {max_chars:,}")
        prompts.append(text)
        if len(prompts) > MAX_PROMPTS:
            raise ValueError(f"{path}, line {n}: more than {MAX_PROMPTS} prompts")
    if not prompts:
        raise ValueError(f"{path}: no prompt (one per line; blank lines and lines starting with # are skipped)")
    return prompts
