"""The export's own promises, in a process of its own (it installs a tracer provider):
``python export_checks.py CHECK URL [URL2]``; prints JSON.

- ``flush URL``: one span to a receiver that refuses it (or never answers): what ``flush``
  says, and how long it took;
- ``twice URL``: ``trace_to`` twice to one receiver: the same export, each span sent once;
- ``close URL URL2``: three exports (two to URL2 under other spellings are one), one closed
  while a span is being handed out: the others still get it.
"""

from __future__ import annotations

import json
import sys
import time

from agentscope_context_ext import trace_to
from agentscope_context_ext.core.tracing import context_span


def flush(url: str) -> dict:
    export = trace_to(url, check=False)
    with context_span("context.check"):
        pass
    started = time.monotonic()
    taken = export.flush(timeout=1.0)
    return {"taken": taken, "seconds": round(time.monotonic() - started, 2)}


def twice(url: str) -> dict:
    first = trace_to(url, project="one")
    second = trace_to(url + "/", project="two")
    with context_span("context.check"):
        pass
    assert first.flush()
    return {"same": first is second, "project": second.project}


def close(url: str, url2: str) -> dict:
    first = trace_to(url)
    second = trace_to(url2)
    third = trace_to(url2.replace("127.0.0.1", "localhost"))
    # the first export's processor closes the second one while the span is handed out
    processor = first._processor
    handed = processor.on_end

    def on_end(span):
        second.close()
        handed(span)

    processor.on_end = on_end
    with context_span("context.check"):
        pass
    return {"first": first.flush(), "third": third.flush(), "second_closed": second.closed}


if __name__ == "__main__":
    check, *urls = sys.argv[1:]
    print(json.dumps({"flush": flush, "twice": twice, "close": close}[check](*urls)))
