"""Agents from an agent file: the model of your choice, tools, and context management on
(``build_agent("agent.yaml")``, ``agentscope-context chat --agent agent.yaml``), on the installed
AgentScope: a 2.x ``Agent`` (with the ``ContextMiddleware``) or a 1.x ``ReActAgent``."""

from ..adapter import installed
from ..core.agent_file import ModelSettings, ModelUnavailable
from ..core.model_servers import explain_model_failure as _explain

build_agent = installed.build_agent
build_model = installed.build_model
MODEL_APIS = installed.MODEL_APIS

__all__ = ["MODEL_APIS", "ModelUnavailable", "build_agent", "build_model", "explain_model_failure"]


def explain_model_failure(exc: BaseException, settings: ModelSettings | None) -> str | None:
    """One line on why a call to the model ``settings`` describe failed with ``exc``: the
    server cannot be reached (the line names its URL), does not speak the provider's API (it
    is asked once), or answered an HTTP error; ``None`` for any other failure. Blocking: from
    async code, run it in a thread."""
    api = MODEL_APIS.get(settings.provider) if settings is not None else None
    return _explain(exc, settings, api)
