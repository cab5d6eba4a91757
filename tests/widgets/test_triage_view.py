"""The failure triage view in the notebook: what it lists, Open example / Back, and Retry…
asked first, reported run by run, and the list read again after it."""

from __future__ import annotations

import smithers_tt as st
from smithers_tt.widgets import TriageView

from .._triage_flows import failing_runs, workflow
from ._reports import said, text


def _groups(view: TriageView) -> list[str]:
    return [text(row.children[0].value) for row in view.rows.children[1:]]


def test_the_view_lists_the_groups_largest_first_with_what_a_person_needs(
    db: st.Database,
) -> None:
    runs = failing_runs(db)
    view = TriageView(db)
    assert "Failures: 2 group(s), 8 failure(s)" in text(view.title.value)
    first, second = _groups(view)
    assert first.startswith("TimeoutError: fetch of <str> timed out after <n> s on <n> 7 4 attempt")
    assert "7 4 attempt triage-flow fetch" in first
    assert second.startswith("ValueError: no title in page 1 1 attempt triage-flow parse")
    # the example run: its short id, whole on hover
    assert f"parse {runs['bad-3']} " in said(view.rows.children[2].children[0].value)
    retry = view.rows.children[1].children[2]
    assert retry.disabled and "workflows=" in retry.tooltip  # no workflow given: cannot retry


def test_a_message_from_an_agent_is_escaped(db: st.Database) -> None:
    async def hostile(request: st.GenerateRequest) -> None:
        raise RuntimeError("<img src=x onerror=alert(1)> failed")

    wf = st.Workflow("hostile")
    wf.task("t", agent=hostile)
    db.run(wf)
    view = TriageView(db)
    html = view.rows.children[1].children[0].value
    assert "<img" not in html and "&lt;img src=x onerror=alert(&lt;n&gt;)&gt; failed" in html


def test_open_example_shows_the_run_at_its_failing_frame_and_back_returns(
    db: st.Database,
) -> None:
    runs = failing_runs(db)
    view = TriageView(db, workflows=[workflow()])
    debugger = view.open_example(1)  # the parse group: one run
    place = view.in_place
    assert place.debugger is debugger
    assert view.list_box.layout.display == "none" and place.debug_box.layout.display is None
    assert place.debug_box.children == (place.back_button, debugger)
    assert debugger.model.run_id == runs["bad-3"]
    frame = debugger.model.frame()
    assert (frame.kind, frame.node_id, frame.state) == ("attempt_finished", "parse", "failed")
    assert f'title="{runs["bad-3"]}"' in debugger.header.value  # its short id, whole on hover

    place.back_button.click()
    assert place.debugger is None and view.list_box.layout.display is None
    assert place.debug_box.layout.display == "none"
    assert len(_groups(view)) == 2


def test_retry_asks_first_then_reports_each_run_and_reads_the_groups_again(
    db: st.Database,
) -> None:
    runs = failing_runs(db)
    view = TriageView(db, workflows=[workflow({"down", "bad"})])
    retry = view.rows.children[1].children[2]
    assert not retry.disabled and retry.description == "Retry 3…"
    assert retry.layout.visibility != "hidden"

    retry.click()
    assert view.confirm_box.layout.display is None
    assert "Reset node fetch" in text(view.confirm_text.value)
    assert db.get_run(runs["down-0"]).status == "failed"  # nothing happens before Confirm
    view.cancel_button.click()
    assert view.confirm_box.layout.display == "none"
    assert db.get_run(runs["down-0"]).status == "failed"

    retry.click()
    view.confirm_button.click()
    report = said(view.report.value)
    for key in ("down-0", "down-1", "down-2"):
        assert f"run {runs[key]} resumed: finished" in report
        assert db.get_run(runs[key]).status == "finished"
    assert f"run {runs['flaky-4']} skipped" in report
    # read again: the timeouts left are the flaky run's, which finished
    first = _groups(view)[0]
    assert "1 1 attempt triage-flow fetch" in first
    left = view.rows.children[1].children[2]
    assert left.disabled and left.layout.visibility == "hidden"  # it showed "Retry 0…"
