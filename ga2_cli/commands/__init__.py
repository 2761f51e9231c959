"""The ``ga2`` commands that run the chip's programs: ``asm``/``disasm``/``run``, the batching checks and
mutants, ``decode-table``, ``prefill`` and ``llm``. Each module provides ``register(subparsers)``."""
