"""The adapter of the installed AgentScope, picked once, here.

Every layer above the adapters (the commands, the demo, replay, agent files, the scripted model
of ``testing``) uses ``installed.<name>``: both adapters offer the same facade (see their
package docstrings), so nothing above them asks which AgentScope is installed.
"""

from .compat import agentscope_major, agentscope_version
from .core.installation import install_command

if agentscope_major() >= 2:
    from . import agentscope2 as installed
elif agentscope_major() == 1:
    try:
        from . import agentscope1 as installed
    except ImportError as exc:
        if "mcp" not in str(exc).lower():
            raise
        raise ImportError(
            f"AgentScope {agentscope_version()} does not import with the installed mcp ({exc}); "
            f"AgentScope 1.x needs mcp<2: {install_command('agentscope1')}"
        ) from exc
else:
    raise ImportError(
        f"AgentScope is not installed: {install_command('agentscope2')} (AgentScope 2.x) or "
        f"{install_command('agentscope1')} (1.x)"
    )

__all__ = ["agentscope_version", "installed"]
