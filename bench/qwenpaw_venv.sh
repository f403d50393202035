#!/usr/bin/env bash
# The venv in which bench/qwenpaw_side.py runs QwenPaw's Scroll context manager (a B8 side).
#
# Usage: bash bench/qwenpaw_venv.sh [VENV]   (default /work/venv-qwenpaw; idempotent)
#
# QwenPaw 2.2.2.post1 pins agentscope 2.0.10 (this package's own venv has 2.0.11) and declares
# some sixty dependencies for its app (channels, browsers, models, OCR ...). Scroll and the part
# of QwenPaw that wires it need few of them, so QwenPaw is installed without its dependencies
# and then only what `import`ing the agent, the builder and Scroll asks for (found by trying
# the imports), at the versions QwenPaw's metadata asks for. Then this package, without its
# dependencies (agentscope 2.0.10 is not its >=2.0.11 pin, but its scripted model and extractive
# summarizer work there).
set -euo pipefail

VENV="${1:-/work/venv-qwenpaw}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)

"${PIP[@]}" "agentscope==2.0.10"
# pip then reports QwenPaw's other requirements as missing: expected, they are never imported.
"${PIP[@]}" --no-deps "qwenpaw==2.2.2.post1"
# What the imports need, pinned as qwenpaw's metadata pins them. agentscope 2.0.10 alone pulls
# newer openai, anyio and websockets than QwenPaw allows: those are pinned back.
"${PIP[@]}" \
    "apscheduler>=3.11.2,<4" \
    "packaging>=24.0" \
    "openai>=2.0.0,<=2.33.0" \
    "anyio>=4.0.0,<4.13.0" \
    "websockets>=15.0.1,<16" \
    "google-genai>=1.67.0" \
    "pillow>=10.0.0" \
    "html2text>=2024.2.26" \
    "playwright>=1.49.0"
"${PIP[@]}" --no-deps -e "$HERE"

# Fails here, not in the benchmark, if an import is still missing.
QWENPAW_WORKING_DIR="$(mktemp -d)" QWENPAW_LOG_LEVEL=error "$VENV/bin/python" -c '
import qwenpaw.agents.react_agent, qwenpaw.runtime.builder
import qwenpaw.agents.context.scroll.manager, qwenpaw.agents.context.scroll.recall_tool
from agentscope_context_ext.core.summary import extractive_summary
from agentscope_context_ext.testing import ScriptedChatModel
from importlib.metadata import version
print("qwenpaw venv ready: agentscope", version("agentscope"), "qwenpaw", version("qwenpaw"))
'
