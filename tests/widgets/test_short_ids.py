"""The debugger shows run ids shortened to their shortest unique prefix, the whole id on
hover; ``db.debug`` opens a run by a unique prefix; Replay labels its child ``replay_of``."""

from __future__ import annotations

import re

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger, DebuggerModel


def test_header_shows_the_short_id_with_the_whole_id_on_hover(db: st.Database) -> None:
    wf, _ = demo_workflow()
    parent = db.run(wf, {"topic": "bee"}).id
    child = db.fork(parent, 6).id
    short = db.store.short_run_ids([parent, child])

    dbg = Debugger(db, child, live=False)

    ids = re.findall(r'<code class="stt-id" title="([^"]+)">([^<]+)</code>', dbg.header.value)
    assert ids == [(child, short[child]), (parent, short[parent])]
    assert all(8 <= len(s) < 21 for s in short.values())


def test_fork_tree_buttons_show_short_ids_and_the_whole_id_as_tooltip(db: st.Database) -> None:
    wf, _ = demo_workflow()
    parent = db.run(wf, {"topic": "bee"}).id
    child = db.fork(parent, 6).id
    short = db.store.short_run_ids([parent, child])

    dbg = Debugger(db, parent, live=False)

    for run_id in (parent, child):
        button = dbg.fork_tree.buttons[run_id]
        assert button.description.startswith(f"{short[run_id]} · ")
        assert button.tooltip == f"show run {run_id}"


def test_debug_opens_a_run_by_a_unique_prefix(db: st.Database) -> None:
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id

    dbg = db.debug(run_id[:10], live=False)

    assert dbg.model.run_id == run_id


def test_the_replay_button_labels_the_child_replay_of_its_run(db: st.Database) -> None:
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}, labels={"case": "clean"}).id
    model = DebuggerModel(db, run_id, workflow=wf)
    model.select_frame(3)

    model.request_replay(reset=["write"])
    result = model.confirm()

    assert result is not None and result.ok
    assert db.get_run(result.run_id).labels == {"case": "clean", "replay_of": run_id}
