"""Tools given to the agent (SPEC 6): ``read_file`` now; dialog and memory tools build on it."""

from ._dialog_tools import make_dialog_tools
from ._memory_tools import make_memory_tools
from ._read_file import FileReader, ReadFileError, make_read_file_tool, resolve_allowed_roots

__all__ = [
    "FileReader",
    "ReadFileError",
    "make_dialog_tools",
    "make_memory_tools",
    "make_read_file_tool",
    "resolve_allowed_roots",
]
