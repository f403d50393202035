"""The steps of the pre-reasoning pipeline (SPEC 4), independent of the AgentScope version."""
