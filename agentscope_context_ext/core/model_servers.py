"""Why a model call failed, in one line: the model's server cannot be reached (refused, reset,
timed out, gone mid-answer: the line names its URL), the server an agent file names does not
speak the provider's API, or it answered with an HTTP error.

Each client fails its own way when the server speaks another protocol: the ``ollama`` client
raises ``JSONDecodeError`` on an HTML page, the ``openai`` client hands AgentScope a string
(``'str' object has no attribute 'choices'``), DashScope's raises ``ContentTypeError``. Rather
than read each of those, :func:`explain_model_failure` asks the server once, with the smallest
request of the API it should speak, and says what came back.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .agent_file import ModelSettings
from .errors import ContextExtError

__all__ = [
    "ANTHROPIC_MESSAGES",
    "DASHSCOPE_GENERATION",
    "OLLAMA_CHAT",
    "OPENAI_CHAT",
    "ModelApi",
    "connection_failure",
    "error_chain",
    "explain_model_failure",
    "server_mismatch",
    "unreachable",
]

PROBE_TIMEOUT_SECONDS = 10.0
_PROBE_MESSAGES = [{"role": "user", "content": "Reply with OK."}]


def _openai_probe(model: str) -> dict:
    return {"model": model, "messages": _PROBE_MESSAGES, "max_tokens": 1}


def _ollama_probe(model: str) -> dict:
    return {
        "model": model,
        "messages": _PROBE_MESSAGES,
        "stream": False,
        "options": {"num_predict": 1},
    }


def _dashscope_probe(model: str) -> dict:
    return {"model": model, "input": {"messages": _PROBE_MESSAGES}, "parameters": {"max_tokens": 1}}


@dataclass(frozen=True)
class ModelApi:
    """What a provider's chat endpoint is, its smallest request, and how its answers look."""

    name: str
    """How a message names it (``Ollama's API``)."""
    path: str
    """The chat endpoint, after the base URL."""
    answer_keys: frozenset[str]
    """A JSON answer of this API (an answer or its error) has one of these keys at the top."""
    probe: Callable[[str], dict]
    """The smallest chat request (a one-token answer) for a model name."""
    key_header: str = "Authorization"
    """The header that carries the key (as a bearer token when it is ``Authorization``)."""
    extra_headers: tuple[tuple[str, str], ...] = ()

    def headers(self, key: str | None) -> dict[str, str]:
        """The probe's headers, with ``key`` when there is one."""
        headers = {"Content-Type": "application/json", **dict(self.extra_headers)}
        if key:
            headers[self.key_header] = (
                f"Bearer {key}" if self.key_header == "Authorization" else key
            )
        return headers


OPENAI_CHAT = ModelApi(
    "the OpenAI chat-completions API",
    "/chat/completions",
    frozenset({"choices", "error", "object"}),  # vLLM's errors: {"object": "error", ...}
    _openai_probe,
)
OLLAMA_CHAT = ModelApi("Ollama's API", "/api/chat", frozenset({"message", "error"}), _ollama_probe)
ANTHROPIC_MESSAGES = ModelApi(
    "Anthropic's Messages API",
    "/v1/messages",
    frozenset({"type"}),  # {"type": "message", ...} or {"type": "error", ...}
    lambda model: {"model": model, "max_tokens": 1, "messages": _PROBE_MESSAGES},
    key_header="x-api-key",
    extra_headers=(("anthropic-version", "2023-06-01"),),
)
DASHSCOPE_GENERATION = ModelApi(
    "DashScope's API",
    "/services/aigc/text-generation/generation",
    frozenset({"output", "code"}),
    _dashscope_probe,
)


def explain_model_failure(
    exc: BaseException, settings: ModelSettings | None, api: ModelApi | None
) -> str | None:
    """One line on why a call to the model failed with ``exc``, or ``None`` when it is none
    of the three below (a bug is the caller's to report).

    1. The server cannot be reached (:func:`unreachable`): its URL and why.
    2. The server at ``settings.base_url`` does not speak ``api``: the probe's answer, and what
       to check. Asked only when the agent file names a server.
    3. The server answered an HTTP error (a client exception with a ``status_code``): its
       status and what it said, e.g. a local server refusing a request shape.

    Blocking (up to :data:`PROBE_TIMEOUT_SECONDS`); from async code, run it in a thread.
    """
    gone = unreachable(exc, settings.base_url if settings is not None else None)
    if gone is not None:
        return gone
    if settings is not None and settings.base_url and api is not None:
        mismatch = server_mismatch(settings, api)
        if mismatch:
            return mismatch
    return _http_error(exc, settings)


def server_mismatch(settings: ModelSettings, api: ModelApi) -> str | None:
    """Why the server at ``settings.base_url`` does not speak ``api``, from one probe request
    (``None`` when it does, or when it cannot be reached: the call's own error says that)."""
    assert settings.base_url is not None
    url = settings.base_url.rstrip("/") + api.path
    try:
        key = settings.api_key()
    except ValueError:  # no key in the environment: the server can still say what it is
        key = None
    body = json.dumps(api.probe(settings.model)).encode()
    request = urllib.request.Request(url, body, api.headers(key), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_SECONDS) as response:
            status, kind = response.status, response.headers.get_content_type()
            data = response.read(64 * 1024)
    except urllib.error.HTTPError as error:
        status, kind = error.code, error.headers.get_content_type()
        data = error.read(64 * 1024)
    except (OSError, ValueError):  # refused, reset, timed out: not this function's to explain
        return None
    if _speaks(api, data):
        return None
    return (
        f"the server at {settings.base_url} does not speak {api.name} (POST "
        f"{urlsplit(url).path} answered HTTP {status} with {_describe(kind, data)}): check "
        f"model.base_url and model.provider ({settings.provider})"
    )


def _speaks(api: ModelApi, data: bytes) -> bool:
    try:
        answer: Any = json.loads(data)
    except ValueError:
        return False
    return isinstance(answer, dict) and bool(api.answer_keys & answer.keys())


def _describe(kind: str, data: bytes) -> str:
    """What a body is, in a few words: an HTML page by its title, else its start."""
    text = " ".join(data.decode("utf-8", errors="replace").split())
    if not text:
        return "an empty body"
    if kind == "text/html" or text.startswith("<"):
        title = re.search(r"<title[^>]*>([^<]*)</title>", text, re.IGNORECASE)
        return f"an HTML page {title.group(1).strip()[:60]!r}" if title else "an HTML page"
    return f"{kind} {text[:80]!r}"


def _http_error(exc: BaseException, settings: ModelSettings | None) -> str | None:
    """The HTTP error the client raised ``exc`` for (found on it or what it was raised from)."""
    for current in error_chain(exc):
        status = getattr(current, "status_code", None)
        if isinstance(status, int) and status >= 400:
            reason = " ".join(str(current).split())[:300] or type(current).__name__
            where = f" at {settings.base_url}" if settings and settings.base_url else ""
            return (
                f"the model server{where} answered HTTP {status}: {reason}{_hint(status, settings)}"
            )
    return None


def _hint(status: int, settings: ModelSettings | None) -> str:
    """What to try when a strict OpenAI-compatible server fails on AgentScope's request shape."""
    compat = settings.openai_compat() if settings is not None else None
    if compat is None or status < 500 or compat.string_content:
        return ""
    return (
        " (a server that takes only string content, such as llama-cpp-python's, needs "
        "model.compat.string_content: true, the default)"
    )


# -- a server that cannot be reached ---------------------------------------------------------

_NETWORK_ERRORS = frozenset(
    {
        "APIConnectionError",  # openai, anthropic (APITimeoutError is one)
        "TransportError",  # httpx: connect, read, write, protocol errors and time-outs
        "ConnectError",  # httpcore, under httpx
        "ReadError",
        "RemoteProtocolError",
        "ClientConnectionError",  # aiohttp (dashscope): ClientConnectorError is one
        "ServerDisconnectedError",
        "ConnectionError",  # requests (dashscope's synchronous calls), besides the builtin
        "ConnectTimeout",
        "ReadTimeout",
    }
)
"""Connection failures by class name (in the class's MRO), so no client needs importing."""
_API_PATHS = ("/chat/completions", "/api/chat", "/v1/messages", "/messages")
"""What a client adds to the base URL it was given (stripped to name the server as set)."""


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what it was raised from or during, once each; the members of an
    exception group too (an async client fails inside a task group)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current: BaseException | None = pending.pop()
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            yield current
            if isinstance(current, BaseExceptionGroup):
                pending.extend(reversed(current.exceptions))
            current = current.__cause__ or current.__context__


def connection_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the model's server refusing, resetting or dropping the connection, or
    not answering in time, whichever client raised it (openai, anthropic, httpx, ollama,
    aiohttp). An error of this package's (a Redis workspace that is down is one) is not, nor is
    a closed standard output (``BrokenPipeError``)."""
    for current in error_chain(exc):
        if isinstance(current, ContextExtError | BrokenPipeError):
            return False
        if isinstance(current, ConnectionError | TimeoutError):
            return True
        if any(cls.__name__ in _NETWORK_ERRORS for cls in type(current).__mro__):
            return True
    return False


def unreachable(exc: BaseException, base_url: str | None = None) -> str | None:
    """``cannot reach the model at URL: REASON`` when ``exc`` is a connection failure
    (:func:`connection_failure`), else ``None``. The URL is ``base_url`` (the agent file's), else
    the one the failed request went to, without the API's path; ``REASON`` the system's words
    (``connection refused``), else the client's (``server disconnected without sending a
    response``)."""
    if not connection_failure(exc):
        return None
    chain = list(error_chain(exc))
    url = _shown_url(base_url) if base_url else _request_url(chain)
    where = f" at {url}" if url else ""
    return f"cannot reach the model{where}: {_reason(chain)}"


def _shown_url(url: str) -> str:
    """``url`` without a password or query (a key may sit there)."""
    parts = urlsplit(url)
    if not parts.netloc:  # no scheme (an Ollama host as "localhost:11434"): as written
        return url.split("?", 1)[0].rsplit("@", 1)[-1]
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _request_url(chain: list[BaseException]) -> str | None:
    """The URL the failed request went to, found on the exceptions (httpx's and the clients'
    ``request``, aiohttp's ``host``/``port``), without the API's path."""
    for current in chain:
        try:
            request = getattr(current, "request", None)
        except Exception:  # noqa: BLE001 - httpx raises RuntimeError when it was never set
            request = None
        url = getattr(request, "url", None)
        if url is not None:
            shown = _shown_url(str(url))
            for path in _API_PATHS:
                if shown.endswith(path):
                    return shown[: -len(path)]
            return shown
        host, port = getattr(current, "host", None), getattr(current, "port", None)
        if isinstance(host, str) and isinstance(port, int):
            return f"{host}:{port}"
    return None


def _reason(chain: list[BaseException]) -> str:
    """Why, in a few words: the system's words for the deepest error number, else a time-out,
    else the deepest message the clients gave."""
    for current in reversed(chain):
        number = getattr(current, "errno", None)
        if isinstance(number, int) and number > 0:
            return os.strerror(number).lower()
        words = getattr(current, "strerror", None)
        if isinstance(words, str) and words:  # socket.gaierror: "Name or service not known"
            return words[:1].lower() + words[1:]
    if any(
        "Timeout" in type(current).__name__ or isinstance(current, TimeoutError)
        for current in chain
    ):
        return "timed out"
    for current in reversed(chain):
        text = " ".join(str(current).split()).rstrip(".")
        if text:
            return (text[:1].lower() + text[1:])[:200]
    return type(chain[0]).__name__
