"""B11's many workers: processes that each keep their own history index of one Redis store."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from agentscope_context_ext.adapter import installed
from agentscope_context_ext.core.search import Conversation, search_history
from agentscope_context_ext.core.tools import record_view
from agentscope_context_ext.core.workspace import open_storage

__all__ = ["WORKERS", "workers_on_one_store"]

WORKERS = 4


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def _worker(url: str, cache: str, conn) -> None:
    """One worker process: its own private cache folder (its own index of the shared store);
    answers ``(query)`` with (documents caught up, catch-up s, search s) until ``None``."""
    os.environ["TMPDIR"] = cache
    tempfile.tempdir = None  # the private cache folder is under it
    storage = open_storage(url)
    view = record_view(installed.open_dialog(storage))
    conversation = Conversation(storage, view=view)
    while (query := conn.recv()) is not None:
        started = time.perf_counter()
        added = conversation.history().refresh()
        caught = time.perf_counter() - started
        started = time.perf_counter()
        search_history([conversation], query, 10)
        conn.send((added, caught, time.perf_counter() - started))
    conversation.history().close()


def workers_on_one_store(corpus, increment: int, rounds: int = 7) -> dict:
    """``WORKERS`` processes on one Redis store (``corpus``, B11's), each with its own index:
    all but one make theirs at once (their first search), then rounds of ``increment`` appended
    messages and each
    worker's next search (its catch-up per message); then the last, new worker's first search
    while the others go on searching."""
    context = multiprocessing.get_context("spawn")
    folder = tempfile.mkdtemp(prefix="b11-workers-")
    pipes, processes = [], []
    try:
        for n in range(WORKERS):
            cache = Path(folder) / f"worker-{n}"
            cache.mkdir()
            ours, theirs = context.Pipe()
            process = context.Process(target=_worker, args=(corpus.workspace, str(cache), theirs))
            process.start()
            pipes.append(ours)
            processes.append(process)
        old = pipes[:-1]

        def ask(chosen, query: str) -> list[tuple[int, float, float]]:
            for pipe in chosen:
                pipe.send(query)
            return [pipe.recv() for pipe in chosen]

        first = ask(old, "spotter")
        catch_up, after = [], []
        for _ in range(rounds):
            corpus.append(increment)
            for added, caught, searched in ask(old, "transcript"):
                catch_up.append(caught / max(added, 1))
                after.append(searched)
        pipes[-1].send("spotter")  # the new worker's first search, the others searching
        while not pipes[-1].poll(0.05):
            ask(old, "session transcript")
        _, new_build, new_search = pipes[-1].recv()
        corpus.append(increment)
        last = ask(pipes, "transcript")
        return {
            "workers": WORKERS,
            "messages": corpus.size + corpus.appended,
            "first_search_s": [round(c + q, 2) for _, c, q in first],
            "catch_up_ms_per_message": round(statistics.median(catch_up) * 1000, 3),
            "catch_up_ms_per_message_p90": round(_percentile(catch_up, 0.9) * 1000, 3),
            "search_after_ms": round(statistics.median(after) * 1000, 2),
            "new_worker_first_search_s": round(new_build + new_search, 2),
            "all_caught_up_after": [added for added, _, _ in last],
        }
    finally:
        for pipe in pipes:
            with contextlib.suppress(OSError, BrokenPipeError):
                pipe.send(None)
        for process in processes:
            process.join(60)
            if process.is_alive():
                process.kill()
        shutil.rmtree(folder, ignore_errors=True)
