"""The version-neutral core: everything that does not need AgentScope.

Nothing under ``core`` imports AgentScope; the adapters (``agentscope1``) map AgentScope's
messages onto :mod:`.messages` and call in here.
"""
