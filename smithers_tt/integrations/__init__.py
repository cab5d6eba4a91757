"""Integrations with other agent frameworks and model providers.

Each module imports its framework lazily and only when imported itself; ``import smithers_tt``
never imports any of them.

* :mod:`smithers_tt.integrations.openai_agent`: :class:`ChatAgent`, a checkpoint-aware chat
  agent for any OpenAI-compatible endpoint (extra ``openai``).
* :mod:`smithers_tt.integrations.langgraph`: :class:`SmithersSaver`, a LangGraph checkpoint
  saver backed by the smithers_tt store (extra ``langgraph``).
* :mod:`smithers_tt.integrations.langgraph_import`: :func:`import_langgraph`, which copies a
  SqliteSaver or PostgresSaver database into a smithers_tt store.
* :mod:`smithers_tt.integrations.langgraph_view`: a LangGraph thread read as super-steps (with
  the frames the debugger shows them at) and diffs of channel values.
"""
