"""Prompt checks shared by replay, the demo and the tests."""

from __future__ import annotations

from collections.abc import Iterable


def prompt_pair_violations(prompt: list[dict], answered: Iterable[str] = ()) -> int:
    """Orphans in a formatted (OpenAI/DashScope layout) prompt.

    Counts tool results whose call is not earlier in the prompt, and calls without their result
    in the prompt although the conversation had answered them (``answered``): both are what a
    provider rejects, and what a cut through a tool sequence produces.
    """
    answered = set(answered)
    open_calls: dict[str, int] = {}
    violations = 0
    for message in prompt:
        if message.get("role") == "tool":
            call_id = str(message.get("tool_call_id"))
            if open_calls.get(call_id, 0) == 0:
                violations += 1
            else:
                open_calls[call_id] -= 1
        for call in message.get("tool_calls") or []:
            call_id = str(call.get("id"))
            open_calls[call_id] = open_calls.get(call_id, 0) + 1
    violations += sum(n for call_id, n in open_calls.items() if n > 0 and call_id in answered)
    return violations
