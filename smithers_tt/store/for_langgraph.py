"""The LangGraph saver's door into the store: what ``smithers_tt.integrations`` uses, and
nothing else.

A LangGraph thread is a run of the reserved workflow ``LANGGRAPH_WORKFLOW``; the saver reads
it in one transaction (``LangGraphRead``), writes it through the ledger (``LangGraphWrite``,
``ThreadReplaced``) and holds both behind ``LangGraphStore``. The integrations import
``smithers_tt.store`` (records) and this door only (import-linter, ``pyproject.toml``; see
``docs/store.md``, "The doors").
"""

from smithers_tt.store._langgraph import LangGraphStore
from smithers_tt.store.backend import (
    LANGGRAPH_DOC_NODE,
    LANGGRAPH_VALUE_NODE,
    LANGGRAPH_WORKFLOW,
    LangGraphIndexQuery,
    langgraph_run_id,
)
from smithers_tt.store.ledger import LangGraphCalls, LangGraphWrite, ThreadReplaced
from smithers_tt.store.reads import LangGraphDocument, LangGraphRead

__all__ = [
    "LANGGRAPH_DOC_NODE",
    "LANGGRAPH_VALUE_NODE",
    "LANGGRAPH_WORKFLOW",
    "LangGraphCalls",
    "LangGraphDocument",
    "LangGraphIndexQuery",
    "LangGraphRead",
    "LangGraphStore",
    "LangGraphWrite",
    "ThreadReplaced",
    "langgraph_run_id",
]
