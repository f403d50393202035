"""The AgentScope 1.x adapter: AgentScope's ``Msg`` mapped onto the core's neutral view."""
