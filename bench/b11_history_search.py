"""B11 - history search at scale: the history index (SQLite FTS5, BM25) against today's scan
(``DialogStore.search``), on a local folder and on Redis.

Corpora of 10k, 100k and 1M saved messages, made from the shared transcripts: the two Claude
Code sessions and a Chinese conversation from the design text in ``shared/seed``, repeated with
a variation per copy (the digits 1-9 of every string permuted, so that numbers, line numbers,
hashes and paths differ from copy to copy), written with ``DialogStore.append`` one day file at a
time (3,000 messages a day). An old tool output keeps what stage two leaves of it (3,000 bytes
and the notice); a few hundred outputs are saved whole in ``tool_result/`` (``ToolResultStore``)
with their message pointing at them. 50 identifiers are planted, each in one known place: a
cache key (``probe_cache_key_<n>``), a file path (``src/probe_<n>/handler.py``) or a Chinese
word, in a message or deep in a saved output (past the excerpt its message keeps).

Measured per size and backend: the index build (the first search), per message; the index's
size; search latency (median, p99) over a query mix (the planted identifiers, common words, two
words, a phrase, a prefix, Chinese); the same queries with today's scan (capped at 1M); the
catch-up after 10 appended messages, per message, interleaved across sizes; recall (each planted
identifier's place must be the first hit).

Redis: the server at ``ACE_REDIS_URL``, else a private ``redis-server`` (B9's), at 10k and 100k
(1M with ``ACE_B11_REDIS_1M=1``); without either the Redis part is reported skipped. Corpora go
to a temporary folder and Redis keys under a prefix of their own; both are removed after, and so
is a Redis workspace's index file in the private cache folder. ``--quick``: 10k only.

Target: p99 < 50 ms at 1M messages locally; the per-appended-message catch-up flat (at the
largest size at most 2x its cost at 10k, while history grew 100x); every planted identifier
ranked first, locally and on Redis. Redis latency is reported beside it (the p99 target is
local). A quick run (no 1M) never meets the target.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from agentscope_context_ext import truncate_text_output
from agentscope_context_ext.adapter import installed
from agentscope_context_ext.core.search import (
    Conversation,
    HistoryIndex,
    index_location,
    search_history,
)
from agentscope_context_ext.core.search._engines import tantivy_available
from agentscope_context_ext.core.tools import record_view
from agentscope_context_ext.core.workspace import DialogStore, ToolResultStore, open_storage
from agentscope_context_ext.replay import Record, claude_code_records

from ._b11_workers import workers_on_one_store
from ._data import chinese_conversation, transcripts_dir

TITLE = "history search at scale: the index against today's scan, local and Redis"
TARGET = (
    "p99 < 50 ms at 1M messages locally; per-appended-message catch-up flat (largest <= 2x "
    "10k); every planted identifier ranked first"
)
KEPT = "tantivy" if tantivy_available() else "fts5"
"""The engine the target is judged on: the one the tools use (the ``search`` extra's)."""
ENGINES = ("tantivy", "fts5") if tantivy_available() else ("fts5",)
"""Measured side by side on the same corpora (design §6.2 says why one is kept)."""
SIZES = (10_000, 100_000, 1_000_000)
REDIS_SIZES = (10_000, 100_000)
REDIS_1M_ENV = "ACE_B11_REDIS_1M"
"""Set to 1 to run Redis at 1M too (about 2.7 minutes and 1.4 GB of server memory more: left
out of the default run, which must leave the whole suite its 10 minutes; a Redis search pays
round trips per day file, which 10k and 100k already show)."""
PROBES = 50
PER_DAY = 3_000
EXCERPT_BYTES = 3_000
"""What an old output keeps in the dialog: stage two's default ``second_max_bytes``."""
SAVED_OUTPUTS = 300
SAVED_MIN_BYTES = 32 * 1024
START = datetime(2024, 1, 1)
SESSIONS = (
    "4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
    "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
)
CJK_A = "甲乙丙丁戊己庚辛壬癸"
CJK_B = "子丑寅卯辰巳午未申酉戌亥"
OTHER_QUERIES = {
    "common word": ["spotter", "the", "transcript", "test", "error"],
    "two words": ["session transcript", "liveview render"],
    "phrase": ['"tail adapter"'],
    "prefix": ["transcr*", "playw*"],
    "Chinese": ["上下文", "截断", "压缩 摘要"],
}
"""The query mix beside the planted identifiers. ``spotter`` is in 68% of the messages, ``the``
in 47%, ``transcript`` 21%, ``test`` 24%, ``error`` 8% (document frequencies in the base
transcripts)."""
SCAN_AT_1M = ["probe_cache_key_24", "spotter", "session transcript"]
"""Today's scan at 1M is slow (a query whose words are rare reads every message): these only."""
INCREMENT = 10
SCAN_GROUPS = {
    "rare (planted identifiers)": ("planted identifier",),
    "frequent (common word, two words)": ("common word", "two words"),
    "other (phrase, prefix, Chinese)": ("phrase", "prefix", "Chinese"),
}


def _category(query: str) -> str:
    return next((c for c, qs in OTHER_QUERIES.items() if query in qs), "planted identifier")


# ---------------------------------------------------------------------- the corpus


def _clip(output: str, path_seed: str) -> str:
    """An old output as the dialog keeps it: stage two's excerpt and the notice."""
    if len(output.encode("utf-8")) <= EXCERPT_BYTES:
        return output
    path = f"tool_result/{uuid.uuid5(uuid.NAMESPACE_URL, path_seed).hex}.txt"
    return truncate_text_output(output, max_bytes=EXCERPT_BYTES, file_path=path)


class _Base:
    """The base records as JSON templates, and which of them carry a long tool output."""

    def __init__(self) -> None:
        records: list[Record] = []
        for name in SESSIONS:
            records += claude_code_records(transcripts_dir() / "claude-code" / name)
        records += chinese_conversation()[:-1]  # without its closing summary
        self.templates: list[bytes] = []
        self.long_outputs: dict[int, str] = {}
        """Base index -> the full text of its (one) long tool output."""
        for i, record in enumerate(records):
            blocks = json.loads(json.dumps(record.blocks()))
            for block in blocks:
                if block.get("type") != "tool_result":
                    continue
                output = block.get("output")
                if isinstance(output, list):
                    output = "\n".join(
                        str(b.get("text", "")) for b in output if isinstance(b, dict)
                    )
                    block["output"] = output
                if isinstance(output, str) and len(output.encode("utf-8")) > 2 * EXCERPT_BYTES:
                    self.long_outputs.setdefault(i, output)
                if isinstance(output, str):
                    block["output"] = _clip(output, f"b11-{i}")
            record_dict = {
                "role": record.role,
                "name": record.name or record.role,
                "content": blocks,
            }
            self.templates.append(json.dumps(record_dict, ensure_ascii=False).encode("utf-8"))
        self.assistant = [i for i, r in enumerate(records) if r.role == "assistant"]

    def __len__(self) -> int:
        return len(self.templates)


@functools.lru_cache(maxsize=4)
def _table(copy: int) -> bytes | None:
    """Copy ``copy``'s variation: the digits 1-9 permuted (0 stays, so JSON numbers stay valid),
    as a table for ``bytes.translate`` (UTF-8: the digits are single bytes)."""
    if copy == 0:
        return None
    digits = list("123456789")
    random.Random(copy).shuffle(digits)
    return bytes.maketrans(b"123456789", "".join(digits).encode())


def _vary(text: str, copy: int) -> str:
    table = _table(copy)
    return text if table is None else text.encode("utf-8").translate(table).decode("utf-8")


def _probe(n: int) -> tuple[str, str]:
    """The planted identifier ``n`` and the sentence that holds it."""
    kind = n % 3
    if kind == 0:
        word = f"probe_cache_key_{n}"
        return word, f"Keep the warm entries under {word} until the next deploy."
    if kind == 1:
        word = f"src/probe_{n}/handler.py"
        return word, f"The retry logic moved to {word} in this change."
    word = f"探针{CJK_A[n % 10]}{CJK_B[n // 10]}"
    return word, f"已确认{word}的配置需要在下次发布前更新。"


class Corpus:
    """One generated history in one workspace, and where each planted identifier is."""

    def __init__(self, base: _Base, workspace: str, size: int, saved: int) -> None:
        self.base = base
        self.size = size
        self.workspace = workspace
        self.storage = open_storage(workspace)
        self.store = DialogStore(self.storage)
        self.view = record_view(installed.open_dialog(self.storage))
        """A record as the installed AgentScope's tools show it: what the index reads."""
        self.results = ToolResultStore(self.storage)
        self.expected: dict[str, tuple[str, str, int]] = {}
        """Identifier -> (kind, file, line) of the place it was planted."""
        self.appended = 0
        self.seconds = self._write(saved)

    @staticmethod
    def _place(m: int) -> tuple[str, str, int]:
        day = START + timedelta(days=m // PER_DAY)
        moment = day + timedelta(seconds=(m % PER_DAY) * 86_400 // PER_DAY)
        return moment.isoformat(), f"dialog/{day.date().isoformat()}.jsonl", m % PER_DAY + 1

    def _record(self, m: int) -> dict:
        copy, i = divmod(m, len(self.base))
        template = self.base.templates[i]
        table = _table(copy)
        record = json.loads(template if table is None else template.translate(table))
        timestamp, _, _ = self._place(m)
        return {"id": f"b11-{m:07d}", **record, "timestamp": timestamp}

    def _plan(self, saved: int) -> tuple[dict[int, int], dict[int, int]]:
        """Message -> probe planted in its text; message -> probe (or -1: none) planted in its
        saved output."""
        base = self.base
        long_at = sorted(base.long_outputs)
        in_text: dict[int, int] = {}
        in_output: dict[int, int] = {}
        for n in range(PROBES):
            m = int((n + 0.5) * self.size / PROBES)
            if n % 5 == 4:  # deep in a saved output
                while m % len(base) not in base.long_outputs:
                    m += 1
                in_output[m] = n
            else:
                while m % len(base) not in base.assistant or m in in_output:
                    m += 1
                in_text[m] = n
        # The other saved outputs: long outputs spread evenly over the whole history.
        places = [
            copy * len(base) + i
            for copy in range(max(1, self.size // len(base)))
            for i in long_at
            if copy * len(base) + i < self.size
        ]
        fillers = saved - len(in_output)
        for m in places[:: max(1, len(places) // fillers)][:fillers]:
            in_output.setdefault(m, -1)
        return in_text, in_output

    def _saved_output(self, m: int, probe: int) -> str:
        """The whole output of message ``m``, saved; its message's output becomes the excerpt."""
        copy, i = divmod(m, len(self.base))
        long_at = sorted(self.base.long_outputs)
        full = _vary(self.base.long_outputs[i], copy)
        k = long_at.index(i)
        while len(full.encode("utf-8")) < SAVED_MIN_BYTES:  # a large text: the next outputs too
            k = (k + 1) % len(long_at)
            full += "\n" + _vary(self.base.long_outputs[long_at[k]], copy)
        if probe >= 0:  # deep inside: past the excerpt the message keeps
            _, sentence = _probe(probe)
            at = full.find("\n", max(len(full) * 2 // 3, 4 * EXCERPT_BYTES)) + 1 or len(full)
            full = full[:at] + sentence + "\n" + full[at:]
        path = self.results.save(full)
        if probe >= 0:
            self.expected[_probe(probe)[0]] = ("output", path, 0)
        return truncate_text_output(full, max_bytes=EXCERPT_BYTES, file_path=path)

    def _write(self, saved: int) -> float:
        started = time.perf_counter()
        in_text, in_output = self._plan(saved)
        for first in range(0, self.size, PER_DAY):
            batch = []
            for m in range(first, min(first + PER_DAY, self.size)):
                record = self._record(m)
                if m in in_text:
                    word, sentence = _probe(in_text[m])
                    record["content"].append({"type": "text", "text": sentence})
                    _, file, line = self._place(m)
                    self.expected[word] = ("message", file, line)
                if m in in_output:
                    excerpt = self._saved_output(m, in_output[m])
                    for block in record["content"]:
                        if block.get("type") == "tool_result":
                            block["output"] = excerpt
                            break
                batch.append(record)
            self.store.append(batch)
        return time.perf_counter() - started

    def append(self, count: int) -> None:
        """``count`` new messages at the end of the last day (the next copy of the base)."""
        batch = []
        for _ in range(count):
            m = self.size + self.appended
            record = self._record(m)
            record["timestamp"] = self._place(self.size - 1)[0]
            batch.append(record)
            self.appended += 1
        self.store.append(batch)


# ---------------------------------------------------------------------- measuring


def _queries(corpus: Corpus) -> list[tuple[str, str]]:
    """(category, query): every planted identifier, then the rest of the mix."""
    planted = [("planted identifier", word) for word in corpus.expected]
    return planted + [(cat, q) for cat, qs in OTHER_QUERIES.items() for q in qs]


def _scan_words(query: str) -> str:
    """The query as today's scan takes it (every word a substring: no quotes, no ``*``)."""
    return query.replace('"', " ").replace("*", " ")


def _recall(corpus: Corpus, conversation: Conversation) -> tuple[int, list[str]]:
    missed = []
    for word, (kind, file, line) in corpus.expected.items():
        hits = search_history([conversation], word, 10).hits
        top = hits[0] if hits else None
        ok = (
            top is not None
            and top.kind == kind
            and top.file == file
            and (kind == "output" or top.line == line)
        )
        if not ok:
            missed.append(word)
    return len(corpus.expected) - len(missed), missed


def _scan_found(corpus: Corpus, word: str, records: list) -> bool:
    kind, file, line = corpus.expected[word]
    if kind == "message":
        return any(r.file == file and r.line == line for r in records)
    return any(file in json.dumps(r.record, ensure_ascii=False) for r in records)


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def _index_path(storage, engine: str) -> Path:
    """Each engine's index file: the kept one where the tools find it, the other beside it."""
    path = index_location(storage)
    # beside it under a name of its own (a Redis store's index is named by its digest)
    return path if engine == KEPT else path.with_name(f"{path.stem}-{engine}.sqlite")


def _index_bytes(path: Path) -> int:
    """The index file and the engine's own folder beside it (Tantivy's)."""
    total = path.stat().st_size if path.is_file() else 0
    for folder in path.parent.glob(f"{path.name}.tantivy-*"):
        total += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return total


def _conversation(corpus: Corpus, engine: str, progress=None) -> Conversation:
    conversation = Conversation(corpus.storage, view=corpus.view)
    conversation.index = HistoryIndex(
        corpus.storage,
        path=_index_path(corpus.storage, engine),
        progress=progress,
        view=corpus.view,
        engine=engine,
    )
    return conversation


def _measure(corpus: Corpus, rounds: int, scan: str) -> list[dict]:
    """Build, size, latency, scan and recall of one corpus, one row per engine (each index
    made here; the engines' searches interleaved, A B then B A)."""
    conversations = {}
    rows = {}
    for engine in ENGINES:
        added: list[int] = []
        conversations[engine] = _conversation(corpus, engine, added.append)
        gc.collect()
        started = time.perf_counter()
        search_history([conversations[engine]], "spotter", 10)
        build = time.perf_counter() - started
        docs = sum(added)
        rows[engine] = {
            "engine": engine,
            "messages": corpus.size,
            "saved_outputs": len(corpus.storage.names("tool_result")),
            "docs": docs,
            "write_seconds": round(corpus.seconds, 2),
            "build_seconds": round(build, 2),
            "build_us_per_doc": round(build / max(docs, 1) * 1e6, 1),
            "index_bytes": _index_bytes(_index_path(corpus.storage, engine)),
            "dialog_bytes": _dialog_bytes(corpus),
        }
        print(f"    {engine}: built in {build:.1f} s", flush=True)
    queries = _queries(corpus)
    samples = {e: {q: [] for _, q in queries} for e in ENGINES}
    for r in range(rounds):
        for k, (_, query) in enumerate(queries):
            order = ENGINES if (r + k) % 2 == 0 else ENGINES[::-1]
            for engine in order:
                started = time.perf_counter()
                search_history([conversations[engine]], query, 10)
                samples[engine][query].append(time.perf_counter() - started)
    for engine, row in rows.items():
        mine = samples[engine]
        every = [value for values in mine.values() for value in values]
        row["latency_ms"] = {
            "median": round(statistics.median(every) * 1000, 2),
            "p99": round(_percentile(every, 0.99) * 1000, 2),
            "max": round(max(every) * 1000, 2),
            "samples": len(every),
        }
        by_category: dict[str, dict] = {}
        for category, query in queries:
            entry = by_category.setdefault(category, {"queries": 0, "worst_median_ms": 0.0})
            entry["queries"] += 1
            median = statistics.median(mine[query]) * 1000
            if median > entry["worst_median_ms"]:
                entry["worst_median_ms"] = round(median, 2)
                entry["worst_query"] = query
        row["by_category"] = by_category
        row["query_median_ms"] = {q: round(statistics.median(v) * 1000, 2) for q, v in mine.items()}
        found, missed = _recall(corpus, conversations[engine])
        row["recall"] = {"first": found, "planted": len(corpus.expected), "missed": missed}
    if scan != "none":
        rows[KEPT]["scan"] = _scan(corpus, queries, samples[KEPT], capped=scan == "capped")
    for conversation in conversations.values():
        conversation.history().close()
    return [rows[engine] for engine in ENGINES]


def _scan(corpus: Corpus, queries, samples, capped: bool) -> dict:
    """Today's scan on the same queries (the index's medians beside it)."""
    planted = [q for c, q in queries if c == "planted identifier"]
    chosen = (
        [q for q in SCAN_AT_1M if q in samples]
        if capped
        else planted[:: max(1, len(planted) // 6)][:6]
        + [q for c, q in queries if c != "planted identifier"]
    )
    rows = []
    for query in chosen:
        started = time.perf_counter()
        records = corpus.store.search(_scan_words(query), 10)
        seconds = time.perf_counter() - started
        index_ms = statistics.median(samples[query]) * 1000
        entry = {
            "query": query,
            "scan_ms": round(seconds * 1000, 1),
            "index_ms": round(index_ms, 2),
            "ratio": round(seconds * 1000 / index_ms, 1),
            "scan_hits": len(records),
        }
        if query in corpus.expected:
            entry["scan_found"] = _scan_found(corpus, query, records)
        rows.append(entry)
    scan_ms = [r["scan_ms"] for r in rows]
    return {
        "queries": len(rows),
        "capped": capped,
        "median_ms": round(statistics.median(scan_ms), 1),
        "max_ms": round(max(scan_ms), 1),
        "rows": rows,
    }


def _dialog_bytes(corpus: Corpus) -> int:
    storage = corpus.storage
    return sum(storage.size(f"dialog/{n}") for n in storage.names("dialog") if n.endswith(".jsonl"))


def _increments(corpora: list[Corpus], rounds: int) -> dict[tuple[int, str], dict]:
    """Append 10 messages to each corpus in turn (interleaved across sizes), then time the
    catch-up the next search does first, and that search, for each engine (in turn A B, B A)."""
    conversations = {(c.size, e): _conversation(c, e) for c in corpora for e in ENGINES}
    for conversation in conversations.values():  # opened and caught up: the index exists
        search_history([conversation], "spotter", 10)
    catch_up: dict[tuple[int, str], list[float]] = {key: [] for key in conversations}
    after: dict[tuple[int, str], list[float]] = {key: [] for key in conversations}
    for r in range(rounds):
        for corpus in corpora:
            corpus.append(INCREMENT)
            for engine in ENGINES if r % 2 == 0 else ENGINES[::-1]:
                conversation = conversations[(corpus.size, engine)]
                started = time.perf_counter()
                added = conversation.history().refresh()
                catch_up[(corpus.size, engine)].append(
                    (time.perf_counter() - started) / max(added, 1)
                )
                started = time.perf_counter()
                search_history([conversation], "transcript", 10)
                after[(corpus.size, engine)].append(time.perf_counter() - started)
    for conversation in conversations.values():
        conversation.history().close()
    return {
        key: {
            "catch_up_ms_per_message": round(statistics.median(catch_up[key]) * 1000, 3),
            "search_after_ms": round(statistics.median(after[key]) * 1000, 2),
        }
        for key in catch_up
    }


# ---------------------------------------------------------------------- running


def _clean_redis(url: str) -> None:
    storage = open_storage(url)
    client, prefix = storage.client, storage.prefix
    keys = list(client.scan_iter(match=f"{prefix}:*", count=10_000))
    for start in range(0, len(keys), 10_000):
        client.delete(*keys[start : start + 10_000])


def _remove_index(storage) -> None:
    for engine in ENGINES:
        path = _index_path(storage, engine)
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        for folder in path.parent.glob(f"{path.name}.tantivy-*"):
            shutil.rmtree(folder, ignore_errors=True)


def _backend(
    name: str, base: _Base, sizes, workspace_of, rounds: int, scan_of, inc_rounds: int, saved: int
) -> dict:
    corpora: list[Corpus] = []
    rows: list[dict] = []
    part: dict = {"rows": rows}
    try:
        for size in sizes:
            corpus = Corpus(base, workspace_of(size), size, saved)
            corpora.append(corpus)
            print(f"  {name} {size:,}: written in {corpus.seconds:.1f} s", flush=True)
            for row in _measure(corpus, rounds, scan_of(size)):
                print(
                    f"  {name} {size:,} {row['engine']}: built in {row['build_seconds']} s, p99 "
                    f"{row['latency_ms']['p99']} ms, recall {row['recall']['first']}/"
                    f"{row['recall']['planted']}",
                    flush=True,
                )
                rows.append(row)
        increments = _increments(corpora, inc_rounds)
        for row in rows:
            row.update(increments[(row["messages"], row["engine"])])
        if name == "redis":
            part["workers"] = workers_on_one_store(corpora[0], INCREMENT)
    finally:
        for corpus in corpora:
            if name == "redis":
                _remove_index(corpus.storage)
    return part


def _redis_url() -> tuple[str | None, object, str | None]:
    from .b9_redis_backend import _redis_server

    return _redis_server()


def run(quick: bool = False) -> dict:
    """Measure and return the B11 record."""
    sizes = SIZES[:1] if quick else SIZES
    redis_sizes = REDIS_SIZES[:1] if quick else REDIS_SIZES
    if not quick and os.environ.get(REDIS_1M_ENV, "").strip() == "1":
        redis_sizes = (*REDIS_SIZES, 1_000_000)
    rounds = 3 if quick else 5
    inc_rounds = 3 if quick else 7
    saved = 100 if quick else SAVED_OUTPUTS
    base = _Base()
    record: dict = {
        "id": "B11",
        "what": TITLE,
        "base_records": len(base),
        "per_day": PER_DAY,
        "probes": PROBES,
        "rounds": rounds,
        "target": TARGET,
    }
    folder = tempfile.mkdtemp(prefix="b11-")
    try:
        record["local"] = _backend(
            "local",
            base,
            sizes,
            lambda size: str(Path(folder) / f"local-{size}"),
            rounds,
            lambda size: "capped" if size >= 1_000_000 else "full",
            inc_rounds,
            saved,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    url, server, problem = _redis_url()
    if url is None:
        if server is not None:
            server.kill()
        record["redis"] = {"skipped": problem}
    else:
        if not quick and 1_000_000 not in redis_sizes:
            record["redis_1m"] = f"not run: set {REDIS_1M_ENV}=1 (see the module)"
        run_id = uuid.uuid4().hex[:8]
        base_url = url.split("?")[0]
        try:
            record["redis"] = _backend(
                "redis",
                base,
                redis_sizes,
                lambda size: f"{base_url}?prefix=b11-{run_id}-{size}",
                rounds,
                lambda size: (
                    "none" if size >= 1_000_000 else ("full" if size <= 10_000 else "capped")
                ),
                inc_rounds,
                saved,
            )
        finally:
            for size in redis_sizes:
                _clean_redis(f"{base_url}?prefix=b11-{run_id}-{size}")
            if server is not None:
                server.kill()
                server.wait(60)
    local = [r for r in record["local"]["rows"] if r["engine"] == KEPT]
    largest = local[-1]
    flat = largest["catch_up_ms_per_message"] / local[0]["catch_up_ms_per_message"]
    recall_ok = all(
        r["recall"]["first"] == r["recall"]["planted"]
        for backend in ("local", "redis")
        for r in record.get(backend, {}).get("rows", [])
        if r["engine"] == KEPT
    )
    other = [r for r in record["local"]["rows"] if r["engine"] != KEPT]
    record["kept_engine"] = KEPT
    record["other_engine_p99_ms_at_largest_local"] = (
        other[-1]["latency_ms"]["p99"] if other else None
    )
    record["largest_local"] = largest["messages"]
    record["p99_ms_at_largest_local"] = largest["latency_ms"]["p99"]
    record["catch_up_growth"] = round(flat, 2)
    record["recall_all_first"] = recall_ok
    record["target_met"] = (
        largest["messages"] >= 1_000_000
        and largest["latency_ms"]["p99"] < 50
        and flat <= 2
        and recall_ok
    )
    return record


def table(record: dict) -> str:
    """Markdown tables of a B11 record."""
    if record.get("skipped"):
        return f"skipped: {record['skipped']}"
    lines = [
        f"{record['base_records']} base records, {record['per_day']:,} messages a day file, "
        f"{record['probes']} planted identifiers, {record['rounds']} rounds of the query mix",
        "",
        "| backend | engine | messages | saved outputs | dialog MB | write (s) | build (s) "
        "| build µs/msg | index MB | median (ms) | p99 (ms) | max (ms) "
        "| catch-up ms/appended msg | search after (ms) | planted first |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for backend in ("local", "redis"):
        part = record.get(backend, {})
        if part.get("skipped"):
            lines.append(f"| {backend} | skipped: {part['skipped']} |" + " |" * 13)
            continue
        for r in part.get("rows", []):
            lat = r["latency_ms"]
            lines.append(
                f"| {backend} | {r['engine']} | {r['messages']:,} | {r['saved_outputs']} | "
                f"{r['dialog_bytes'] / 2**20:,.0f} | {r['write_seconds']} | {r['build_seconds']} | "
                f"{r['build_us_per_doc']} | {r['index_bytes'] / 2**20:,.0f} | {lat['median']} | "
                f"{lat['p99']} | {lat['max']} | {r['catch_up_ms_per_message']} | "
                f"{r['search_after_ms']} | {r['recall']['first']}/{r['recall']['planted']} |"
            )
    lines += [
        "",
        "Worst query median by category (ms):",
        "",
        "| backend | engine | messages | "
        + " | ".join(["planted identifier", *OTHER_QUERIES])
        + " |",
        "|---|---|---:|" + "---:|" * (1 + len(OTHER_QUERIES)),
    ]
    for backend in ("local", "redis"):
        for r in record.get(backend, {}).get("rows", []):
            cells = []
            for category in ["planted identifier", *OTHER_QUERIES]:
                entry = r["by_category"].get(category)
                cells.append(
                    f"{entry['worst_median_ms']} (`{entry['worst_query']}`)" if entry else "-"
                )
            lines.append(
                f"| {backend} | {r['engine']} | {r['messages']:,} | " + " | ".join(cells) + " |"
            )
    lines += [
        "",
        "Today's scan (`DialogStore.search`, newest first, stops at 10 hits) against the index, "
        "same queries, by kind (medians of the kind's queries; scan / index per query, then the "
        "median):",
        "",
        "| backend | messages | queries | scan (ms) | index (ms) | scan / index | found by the scan |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for backend in ("local", "redis"):
        for r in record.get(backend, {}).get("rows", []):
            scan = r.get("scan")
            if r["engine"] != record["kept_engine"]:
                continue  # the scan is measured against the kept engine
            if not scan:
                lines.append(f"| {backend} | {r['messages']:,} | not run (time) | | | | |")
                continue
            for group, members in SCAN_GROUPS.items():
                rows = [x for x in scan["rows"] if _category(x["query"]) in members]
                if not rows:
                    continue
                planted = [x for x in rows if "scan_found" in x]
                found = (
                    f"{sum(1 for x in planted if x['scan_found'])}/{len(planted)} found"
                    if planted
                    else f"{statistics.median(x['scan_hits'] for x in rows):.0f} hits"
                )
                scan_ms = statistics.median(x["scan_ms"] for x in rows)
                index_ms = statistics.median(x["index_ms"] for x in rows)
                ratio = statistics.median(x["ratio"] for x in rows)
                lines.append(
                    f"| {backend} | {r['messages']:,} | {len(rows)} {group}"
                    f"{' (capped)' if scan['capped'] else ''} | {scan_ms:,.1f} | {index_ms:.2f} "
                    f"| {ratio:,.1f}x | {found} |"
                )
    lines += [
        "",
        f"p99 at {record['largest_local']:,} messages (local): {record['p99_ms_at_largest_local']} ms; "
        f"catch-up per appended message, largest / 10k: {record['catch_up_growth']}x; "
        f"every planted identifier first: {record['recall_all_first']} (engine "
        f"{record['kept_engine']}; the other's p99 at the largest: "
        f"{record['other_engine_p99_ms_at_largest_local']} ms)",
    ]
    workers = record.get("redis", {}).get("workers")
    if workers:
        lines += [
            "",
            f"{workers['workers']} workers on one Redis store ({workers['messages']:,} messages), "
            "each with its own index:",
            "",
            "| first search, 3 at once (s) | catch-up ms/appended msg (median, p90) "
            "| search after (ms) | new worker's first search (s) | caught up after 10 more |",
            "|---|---:|---:|---:|---|",
            f"| {', '.join(map(str, workers['first_search_s']))} | "
            f"{workers['catch_up_ms_per_message']}, {workers['catch_up_ms_per_message_p90']} | "
            f"{workers['search_after_ms']} | {workers['new_worker_first_search_s']} | "
            f"{workers['all_caught_up_after']} |",
        ]
    if record.get("redis_1m"):
        lines.append(f"Redis at 1M: {record['redis_1m']}")
    return "\n".join(lines)
