"""The workspace as AgentScope 2.x's ``Offloader`` (``agentscope.workspace.Offloader``).

While this package's middleware is on, 2.x's own compression never runs (the middleware's
``on_compress_context`` is the compaction), and stage one cuts every large result before 2.x's
``tool_result_limit`` split sees it. What 2.x still offloads by itself lands in the same
workspace as everything else, reachable by the same tools:

- ``offload_context``: messages 2.x compacted (its ``compress_context`` with the middleware off)
  are appended to ``dialog/YYYY-MM-DD.jsonl``, fsync'ed, one record per message;
- ``offload_tool_result``: the part of a tool result 2.x split off goes to ``tool_result/``
  (2.x splits only what stage one left whole: a result it could not save). 2.x drops that part
  from the context, so one that cannot be saved either is held in memory under its path
  (``ToolResultStore.save_or_hold``), read from there, and saved before the next model call
  that the disk allows (a ``save_failed`` event until then);
- ``offload_data_block``: a base64 medium 2.x takes out of the context (``max_image_num``, an
  input medium the model cannot take) is saved under ``tool_result/`` and comes back as a URL
  block: ``file://`` for a folder workspace, the workspace URL with ``#tool_result/<name>``
  for a Redis one. 2.x drops a medium its offloader hands back unchanged, so one that cannot
  be saved is an error (the reply stops, nothing is dropped), never a block returned as it was.

Each returns the workspace-relative path 2.x puts in its reminder, which ``read_file`` and
``read_dialog`` read.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from agentscope.message import Base64Source, DataBlock, Msg, ToolResultBlock, URLSource

from ..core.errors import WorkspaceError
from ..core.truncation import encode_text
from ..core.workspace import DialogStore, ToolResultStore, portal
from ._convert import output_text

__all__ = ["ContextOffloader"]


class ContextOffloader:
    """An ``Offloader`` writing into this package's workspace.

    Args:
        dialog_store (`DialogStore`): Where offloaded context goes (2.x messages).
        tool_result_store (`ToolResultStore`): Where offloaded results and media go.
        folder (`Path | None`): The workspace folder (``None`` for a Redis workspace).
    """

    def __init__(
        self,
        dialog_store: DialogStore,
        tool_result_store: ToolResultStore,
        folder: Path | None = None,
    ) -> None:
        self.dialog_store = dialog_store
        self.tool_result_store = tool_result_store
        self.folder = folder

    @portal
    async def offload_context(self, session_id: str, msgs: list[Msg]) -> str:
        refs = self.dialog_store.append(list(msgs))
        return "; ".join(str(ref) for ref in refs) or self.dialog_store.directory

    @portal
    async def offload_tool_result(self, session_id: str, tool_result: ToolResultBlock) -> str:
        path, _ = self.tool_result_store.save_or_hold(output_text(tool_result.output))
        return path

    @portal
    async def offload_data_block(self, block: DataBlock) -> DataBlock:
        source = block.source
        if not isinstance(source, Base64Source):
            return block  # a URL block: 2.x names its URL, nothing to save
        try:
            data = base64.b64decode(source.data, validate=True)
        except (binascii.Error, ValueError):
            data = encode_text(source.data)
        try:
            relative = self.tool_result_store.save_media(data, source.media_type)
        except OSError as exc:
            raise WorkspaceError(
                f"cannot save a {source.media_type} block ({len(data)} bytes) that AgentScope "
                f"takes out of the context to {self.tool_result_store.directory}: {exc}; "
                "nothing was dropped"
            ) from exc
        if self.folder is not None:
            url = (self.folder / relative).resolve().as_uri()
        else:
            url = f"{self.tool_result_store.storage.location}#{relative}"
        return DataBlock(
            id=block.id,
            name=block.name,
            source=URLSource(url=url, media_type=source.media_type),
        )
