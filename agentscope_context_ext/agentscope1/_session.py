"""``AtomicJSONSession``: AgentScope's ``JSONSession``, written so that a kill never corrupts it.

``JSONSession.save_session_state`` opens the file for writing (truncating it) and then writes: a
process killed in between leaves an empty or half-written ``<session>.json`` that the agent
cannot load back. This subclass writes the same JSON to a temp file in the same folder, fsyncs
it and renames it over the old file (``os.replace`` is atomic), so a reader sees the previous
state or the new one, never half of one. Loading is ``JSONSession``'s own.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from agentscope.session import JSONSession

from ..core.workspace import atomic_write_bytes

__all__ = ["AtomicJSONSession"]

logger = logging.getLogger("agentscope_context_ext")


class AtomicJSONSession(JSONSession):
    """A ``JSONSession`` whose saves land whole or not at all (temp file, fsync, rename).

    Args:
        save_dir (`str`): The folder of the session files (``<user>_<session>.json``).
    """

    async def save_session_state(
        self,
        session_id: str,
        user_id: str = "",
        **state_modules_mapping: Any,
    ) -> None:
        """Save the state of each module under its name, atomically."""
        state_dicts = {name: module.state_dict() for name, module in state_modules_mapping.items()}
        path = self._get_save_path(session_id, user_id=user_id)
        # The same bytes JSONSession writes (surrogatepass keeps undecodable bytes), but through
        # a temp file: an interrupted save leaves the previous file as it was.
        data = json.dumps(state_dicts, ensure_ascii=False).encode("utf-8", errors="surrogatepass")
        await asyncio.to_thread(atomic_write_bytes, path, data)
        logger.info("saved session state to %s", path)
