"""Tools given to the agent (design §6), as plain async functions returning text: ``read_file``,
the dialog tools and the explorer's ``list_dir``/``grep`` (the memory tools are in
``core.longterm``). Adapters wrap them."""

from ._dialog import DialogTool, make_dialog_tools, record_view
from ._explorer import make_explorer_functions
from ._read_file import make_read_file
from ._reader import FileReader, ReadFileError, resolve_allowed_roots

__all__ = [
    "DialogTool",
    "FileReader",
    "ReadFileError",
    "make_dialog_tools",
    "make_explorer_functions",
    "make_read_file",
    "record_view",
    "resolve_allowed_roots",
]
