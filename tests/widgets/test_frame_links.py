"""Links to a frame (issue 35, item 5): ``db.debug(run, frame=N)`` opens there, the debugger's
link gives the code and the ``smithers-tt serve`` address of the frame shown, and follows it
through a scrub, a rewind and a fork; on a store opened read-only, every action is off and
says why, and nothing is written."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

import smithers_tt as st
from smithers_tt._links import frame_link, read_query, serve_base, shared_url
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import InvalidArgument, StoreReadOnly
from smithers_tt.widgets import Debugger


@pytest.fixture
def run_id(db: st.Database) -> str:
    wf, _ = demo_workflow()
    return db.run(wf, {"topic": "bee"}).id


def link_target(dbg: Debugger) -> tuple[str, str, int, str, int]:
    """What the link's code and address open: (store URL, run, frame) from the code as
    Python reads it, and (run, frame) from the address as ``smithers-tt serve`` reads it."""
    calls = [n for n in ast.walk(ast.parse(dbg.link.code)) if isinstance(n, ast.Call)]
    by_name = {c.func.attr: c for c in calls if isinstance(c.func, ast.Attribute)}
    store = ast.literal_eval(by_name["connect"].args[0])
    debug = by_name["debug"]
    code_run = ast.literal_eval(debug.args[0])
    (frame_kw,) = debug.keywords
    url_run, url_frame = read_query(urlsplit(dbg.link.url).query)
    assert url_run is not None and url_frame is not None
    return store, code_run, ast.literal_eval(frame_kw.value), url_run, url_frame


def shown(dbg: Debugger) -> set[tuple[str, int]]:
    """The (run, frame) every part of the screen names: the link's code, its address and
    title, the header, the scrubber and the actions' title."""
    m = dbg.model
    _, code_run, code_frame, url_run, url_frame = link_target(dbg)
    title = re.fullmatch(r"Link to frame (\d+) of run (\w+)", dbg.link.title)
    assert title is not None
    short = m.short_ids()[m.run_id]
    assert title.group(2) == short
    header_run = re.search(r'<h4>Run <code class="stt-id" title="(\w+)"', dbg.header.value)
    scrubbed = re.match(r"frame (\d+) of", dbg.scrubber.label.value)
    acting = re.search(
        r'Actions at frame (\d+) of run <code class="stt-id" title="(\w+)">',
        dbg.actions.title.value,
    )
    assert header_run and scrubbed and acting
    return {
        (code_run, code_frame),
        (url_run, url_frame),
        (m.run_id, int(title.group(1))),
        (header_run.group(1), int(scrubbed.group(1))),
        (acting.group(2), int(acting.group(1))),
        (m.run_id, m.frame_no),
    }


def test_debug_opens_the_run_at_the_frame_asked_for(db: st.Database, run_id: str) -> None:
    dbg = db.debug(run_id[:8], frame=4, live=False)

    assert shown(dbg) == {(run_id, 4)}
    assert dbg.scrubber.slider.value == 4


@pytest.mark.parametrize("frame", [-1, 10_000, "3", 2.0, True])
def test_debug_at_a_frame_the_run_lacks_says_which_frames_it_has(
    db: st.Database, run_id: str, frame: object
) -> None:
    last = db.get_run(run_id).record.clock

    with pytest.raises(InvalidArgument, match=rf"\b0 to {last}\b"):
        db.debug(run_id, frame=frame, live=False)  # type: ignore[arg-type]


def test_the_link_reopens_the_same_store_run_and_frame(db: st.Database, run_id: str) -> None:
    dbg = db.debug(run_id, frame=6, live=False)

    store, *_ = link_target(dbg)
    again = st.connect(store) if "***" not in store else None
    assert store == shared_url(db.url)
    if again is not None:  # a URL without a password to hide: the code runs as shown
        reopened = again.debug(dbg.model.run_id, frame=6, live=False)
        assert (reopened.model.run_id, reopened.model.frame_no) == (run_id, 6)
        reopened.close()
        again.close()
    query = parse_qs(urlsplit(dbg.link.url).query)
    assert query == {"run": [run_id], "frame": ["6"]}
    assert dbg.link.url.startswith("http://127.0.0.1:8866/?")


def test_the_link_follows_a_scrub_a_rewind_and_a_fork(db: st.Database, run_id: str) -> None:
    dbg = db.debug(run_id, frame=3, live=False)

    dbg.scrubber.next.click()  # scrub
    assert shown(dbg) == {(run_id, 4)}

    dbg.select_frame(7)
    dbg.model.request_rewind("link test")
    assert dbg.model.confirm().ok  # type: ignore[union-attr]
    assert db.get_run(run_id).record.clock == 7
    assert shown(dbg) == {(run_id, 7)}

    dbg.select_frame(5)
    dbg.model.request_fork()
    fork = dbg.model.confirm()
    assert fork is not None and fork.ok and fork.run_id != run_id
    assert shown(dbg) == {(run_id, 5)}

    dbg.fork_tree.buttons[fork.run_id].click()  # the fork, chosen in the fork tree
    assert shown(dbg) == {(fork.run_id, dbg.model.frame_no)}
    dbg.scrubber.first.click()
    assert shown(dbg) == {(fork.run_id, 0)}

    dbg.fork_tree.buttons[run_id].click()  # back to the parent
    assert shown(dbg) == {(run_id, dbg.model.frame_no)}


@pytest.mark.parametrize(
    ("host", "port", "base"),
    [("10.0.0.5", "9000", "http://10.0.0.5:9000/"), ("::1", "8866", "http://[::1]:8866/")],
)
def test_inside_a_served_page_the_link_names_the_page_s_own_server(
    host: str, port: str, base: str
) -> None:
    voila = {"SERVER_NAME": host, "SERVER_PORT": port, "SERVER_SOFTWARE": "voila/0.5.13"}

    link = frame_link("sqlite:////srv/a.db", "1a24a9eeef96868c696aa", 3, serve_base(voila))

    assert serve_base(voila) == base and link.url.startswith(base + "?")
    assert link.command.endswith("serve" if port == "8866" else f"serve --port {port}")
    assert serve_base({}) == "http://127.0.0.1:8866/"  # in a notebook: serve's default


def test_a_served_address_names_the_run_and_frame_or_says_what_is_wrong() -> None:
    assert read_query("run=1a24a9ee&frame=12") == ("1a24a9ee", 12)
    assert read_query("?run=1a24a9ee") == ("1a24a9ee", None)
    assert read_query("") == (None, None)
    with pytest.raises(InvalidArgument, match="whole number"):
        read_query("run=1a24a9ee&frame=twelve")
    with pytest.raises(InvalidArgument, match="names no run"):
        read_query("frame=12")


def test_on_a_read_only_store_every_action_is_off_says_why_and_writes_nothing(
    db: st.Database, run_id: str, tmp_path: Path
) -> None:
    read_only = st.connect(db.url, read_only=True)
    try:
        dbg = read_only.debug(run_id, frame=5, live=False)
        before = db.get_run(run_id).record.clock
        buttons = [dbg.actions.rewind, dbg.actions.undo, dbg.actions.fork, dbg.actions.replay]
        buttons += [dbg.export.jsonl, dbg.export.parquet]

        assert all(b.disabled and "read-only" in b.tooltip for b in buttons)
        assert "Actions are off: the store is opened read-only" in dbg.actions.replay_note.value
        for request in (dbg.model.request_rewind, dbg.model.request_fork):
            assert request() is None
            assert dbg.model.message is not None and "Nothing was done" in dbg.model.message.text
        assert dbg.model.breakpoints.toggle("write", "before") is False
        dbg.export.path.value = str(tmp_path / "history.jsonl")
        dbg.export.export("jsonl")  # as a click past the disabled button would
        assert "Actions are off" in dbg.export.report.value
        assert not (tmp_path / "history.jsonl").exists()
        with pytest.raises(StoreReadOnly):
            read_only.rewind(run_id, 2, confirm=True)
        assert db.get_run(run_id).record.clock == before
        assert [r.id for r in db.runs()] == [run_id]
    finally:
        read_only.close()
