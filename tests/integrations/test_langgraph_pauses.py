"""LangGraph's static breakpoints (``interrupt_before`` / ``interrupt_after``, given to
``compile`` or to ``invoke``) through ``SmithersSaver``: the debugger shows the thread as
paused before or after the node, ``smithers-tt runs --status paused`` lists it (as it lists
a thread waiting on ``interrupt()``), and continuing in LangGraph clears both. On both
backends."""

from __future__ import annotations

import json
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")
from click.testing import CliRunner
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.integrations.langgraph import SmithersSaver
from smithers_tt.integrations.langgraph_view import debug, lens, paused_threads


class State(TypedDict, total=False):
    text: str


def _app(saver: SmithersSaver, ask: bool = False, **compile_options: Any):
    graph = StateGraph(State)
    graph.add_node("draft", lambda s: {"text": s["text"] + " drafted"})
    if ask:
        graph.add_node("review", lambda s: {"text": s["text"] + " " + interrupt("ok?")})
    else:
        graph.add_node("review", lambda s: {"text": s["text"] + " reviewed"})
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "review")
    graph.add_edge("review", END)
    return graph.compile(checkpointer=saver, **compile_options)


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _listed(db: st.Database) -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(cli, ["--db", db.url, "--json", "runs", "--status", "paused"])
    assert result.exit_code == 0, result.output
    return {r["run_id"]: r for r in json.loads(result.output)}


@pytest.mark.parametrize(
    ("options", "when", "node"),
    [({"interrupt_before": ["review"]}, "before", "review"),
     ({"interrupt_after": ["draft"]}, "after", "draft")],
)  # fmt: skip
def test_a_static_breakpoint_shows_as_a_pause_until_langgraph_goes_on(
    db: st.Database, options: dict[str, Any], when: str, node: str
) -> None:
    saver = SmithersSaver(db)
    app = _app(saver, **options)
    out = app.invoke({"text": "memo"}, _cfg("t"))
    assert out == {"text": "memo drafted"}  # LangGraph stopped at its breakpoint
    run_id = saver.run_id("t")
    pause = lens(saver, app).pause(run_id)
    assert pause is not None
    assert (pause["reason"], pause["when"], pause["nodes"]) == (
        f"LangGraph interrupt_{when}",
        when,
        [node],
    )
    listed = _listed(db)
    assert listed[run_id]["status"] == "paused"
    assert listed[run_id]["pause"]["nodes"] == ["review"]  # without the graph: what runs next
    assert app.invoke(None, _cfg("t")) == {"text": "memo drafted reviewed"}
    assert lens(saver, app).pause(run_id) is None and run_id not in _listed(db)


def test_the_debugger_banner_shows_a_static_breakpoint_without_controls(db: st.Database) -> None:
    pytest.importorskip("ipywidgets")
    saver = SmithersSaver(db)
    app = _app(saver, interrupt_before=["review"])
    app.invoke({"text": "memo"}, _cfg("t"))
    bar = debug(saver, "t", graph=app, live=False).pause_bar
    assert bar.widget.layout.display is None and bar.controls.layout.display == "none"
    banner = bar.banner.value
    assert "LangGraph interrupt_before" in banner and "review" in banner
    assert "graph.invoke(None, config)" in banner
    app.invoke(None, _cfg("t"))
    assert debug(saver, "t", graph=app, live=False).pause_bar.widget.layout.display == "none"


def test_breakpoints_given_to_invoke_are_matched_when_the_lens_is_told(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _app(saver)  # no compile-time breakpoints
    app.invoke({"text": "memo"}, _cfg("t"), interrupt_before=["review"])
    run_id = saver.run_id("t")
    told = lens(saver, app, interrupt_before=["review"]).pause(run_id)
    assert told is not None and told["reason"] == "LangGraph interrupt_before"
    assert lens(saver, app, interrupt_after=["review"]).pause(run_id) is None  # not these
    guessed = lens(saver).pause(run_id)  # nothing told: a stop between super-steps
    assert guessed is not None and guessed["reason"] == "LangGraph stopped"
    assert guessed["nodes"] == ["review"]


def test_a_finished_thread_and_a_failed_one_are_not_paused(db: st.Database) -> None:
    saver = SmithersSaver(db)
    _app(saver).invoke({"text": "memo"}, _cfg("done"))
    graph = StateGraph(State)

    def broken(state: State) -> State:
        raise RuntimeError("no")

    graph.add_node("draft", lambda s: {"text": "x"})
    graph.add_node("review", broken)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "review")
    failing = graph.compile(checkpointer=saver)
    with pytest.raises(RuntimeError):
        failing.invoke({"text": "memo"}, _cfg("failed"))
    assert paused_threads(db) == []
    assert lens(saver).pause(saver.run_id("done")) is None
    assert lens(saver).pause(saver.run_id("failed")) is None


def test_runs_status_paused_lists_a_thread_waiting_on_interrupt_too(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _app(saver, ask=True)
    app.invoke({"text": "memo"}, _cfg("asks"))
    wf = st.Workflow("plain")
    wf.task("pick", agent=_Asker())
    own = db.run(wf)
    listed = _listed(db)
    assert set(listed) == {own.id, saver.run_id("asks")}
    assert listed[saver.run_id("asks")]["pause"]["question"] == "ok?"
    table = CliRunner().invoke(cli, ["--db", db.url, "runs", "--status", "paused"]).output
    shown = db.store.short_run_ids([own.id])[own.id]  # ids print shortened
    assert "LangGraph interrupt" in table and shown in table and own.id.startswith(shown)
    app.invoke(Command(resume="fine"), _cfg("asks"))
    assert set(_listed(db)) == {own.id}


class _Asker:
    id = "asker"

    async def generate(self, request: st.GenerateRequest) -> Any:
        return {"said": await request.ask("which?")}
