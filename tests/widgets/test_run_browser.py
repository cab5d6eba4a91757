"""The run browser: newest first, paged in the database, filtered, opened in place with Back
to the same filters and page, and bulk Cancel / Resume asked first and reported per run."""

from __future__ import annotations

import datetime
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.store.for_widgets import RunFilter, run_listing
from smithers_tt.widgets import RunBrowser, _browser
from smithers_tt.widgets._browser import PAGE

from .._statements import statements
from .._triage_flows import failing_runs, workflow
from ._reports import said, text


def _shown(browser: RunBrowser) -> list[list[str]]:
    """Each row as a person reads it: the cells' texts, but the run's whole id (its hover
    title) first, after checking that the cell shows a prefix of it of 8 or more characters."""
    out = []
    for row in browser.rows.children:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.children[1].value, re.S)
        whole = re.search(r'title="([^"]+)"', cells[0]).group(1)
        shown = text(cells[0])
        assert len(shown) >= 8 and whole.startswith(shown), (shown, whole)
        out.append([whole, *(text(c) for c in cells[1:])])
    return out


def _many(db: st.Database, n: int) -> list[str]:
    async def echo(request: st.GenerateRequest) -> dict:
        return {"echo": request.input}

    wf = st.Workflow("echo")
    wf.task("t", agent=echo)
    return [db.run(wf, {"i": i, "note": "50%_off" if i == 3 else "plain"}).id for i in range(n)]


def test_the_newest_runs_come_first_a_page_at_a_time(db: st.Database) -> None:
    ids = _many(db, PAGE + 5)
    browser = db.browse()
    first = [row[0] for row in _shown(browser)]
    assert first == ids[::-1][:PAGE]
    assert browser.newer.disabled and not browser.older.disabled
    assert text(browser.page_label.value) == "page 1"
    row = _shown(browser)[0]
    frames = str(len(db.get_run(ids[-1]).frames()))
    assert row[1:4] == ["echo", "finished", ""] and row[6:8] == [frames, "0"]  # frames, forks

    browser.older.click()
    assert [row[0] for row in _shown(browser)] == ids[::-1][PAGE:]
    assert browser.older.disabled and text(browser.page_label.value) == "page 2"
    browser.newer.click()
    assert [row[0] for row in _shown(browser)] == first


def test_filters_narrow_in_the_database_and_match_text_as_written(db: st.Database) -> None:
    ids = _many(db, 6)
    runs = failing_runs(db)
    browser = RunBrowser(db, status="failed")
    shown = _shown(browser)
    assert {row[2] for row in shown} == {"failed"}
    assert {row[0] for row in shown} == {
        runs["down-0"],
        runs["down-1"],
        runs["down-2"],
        runs["bad-3"],
    }
    browser.status.value = None
    browser.workflow.value = "echo"
    assert [row[0] for row in _shown(browser)] == ids[::-1]
    browser.text.value = "50%_OFF"  # any case; % and _ are themselves
    assert [row[0] for row in _shown(browser)] == [ids[3]]
    browser.text.value = "50%"
    assert [row[0] for row in _shown(browser)] == [ids[3]]
    browser.text.value = "5_"
    assert _shown(browser) == [] and "no run matches" in text(browser.note.value)
    browser.workflow.value = None
    browser.text.value = "no title"
    assert [row[0] for row in _shown(browser)] == [runs["bad-3"]]
    assert _shown(browser)[0][8] == "task 'parse' failed after 1 attempt(s): no title in page"


def test_a_time_range_shows_the_runs_started_between_its_ends(db: st.Database) -> None:
    ids = _many(db, 4)
    started = {i: db.get_run(i).record.created_at_ms for i in ids}
    assert len(set(started.values())) == 4  # ids and times rise together

    def at(ms: int) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)

    browser = RunBrowser(db, started_from=at(started[ids[1]]))
    assert browser.since.value == _browser.BETWEEN
    assert browser.started_from.layout.display == browser.started_until.layout.display == ""
    assert [row[0] for row in _shown(browser)] == ids[:0:-1]  # from: included
    browser.started_until.value = at(started[ids[3]])
    assert [row[0] for row in _shown(browser)] == [ids[2], ids[1]]  # until: excluded
    browser.started_from.value = None  # open on that side
    assert [row[0] for row in _shown(browser)] == ids[2::-1]
    browser.since.value = "any time"  # the pickers hide and stop filtering
    assert browser.started_from.layout.display == "none"
    assert [row[0] for row in _shown(browser)] == ids[::-1]
    browser.since.value = _browser.BETWEEN  # what was picked is kept
    assert [row[0] for row in _shown(browser)] == ids[2::-1]


def test_a_label_filters_the_runs_and_each_row_shows_its_labels(db: st.Database) -> None:
    async def echo(request: st.GenerateRequest) -> dict:
        return {}

    wf = st.Workflow("echo")
    wf.task("t", agent=echo)
    tagged = [db.run(wf, labels={"case": c, "owner": "ana"}).id for c in ("a", "b", "a")]
    db.run(wf)
    browser = RunBrowser(db, label="case=a")
    assert [row[0] for row in _shown(browser)] == [tagged[2], tagged[0]]
    assert _shown(browser)[0][3] == "case=a owner=ana"
    browser.label.value = "owner=ana"
    assert [row[0] for row in _shown(browser)] == tagged[::-1]
    browser.label.value = "owner"  # not key=value: said, and the page stays
    assert "a label is KEY=VALUE" in text(browser.note.value)
    assert [row[0] for row in _shown(browser)] == tagged[::-1]


def test_a_page_counts_forks_and_reads_no_more_than_it_shows(db: st.Database) -> None:
    ids = _many(db, 3)
    db.fork(ids[0], 1)
    db.fork(ids[0], 2)
    listing = run_listing(db.engine, RunFilter(workflow="echo"), limit=10)
    assert listing.forks[ids[0]] == 2 and listing.forks[ids[1]] == 0
    one = run_listing(db.engine, RunFilter(), limit=1)
    assert len(one.runs) == 1 and one.older == one.runs[0].run_id


def test_open_shows_the_debugger_in_place_and_back_keeps_filters_and_page(
    db: st.Database,
) -> None:
    ids = _many(db, PAGE + 2)
    browser = RunBrowser(db, workflow="echo")
    browser.older.click()
    target = _shown(browser)[1][0]
    open_button = browser.rows.children[1].children[2]
    open_button.click()
    place = browser.in_place
    assert place.debugger.model.run_id == target
    assert f'title="{target}"' in place.debugger.header.value  # its short id, whole on hover
    assert browser.list_box.layout.display == "none"

    place.back_button.click()
    assert place.debugger is None and browser.list_box.layout.display is None
    assert browser.workflow.value == "echo" and text(browser.page_label.value) == "page 2"
    assert [row[0] for row in _shown(browser)] == ids[::-1][PAGE:]


def test_bulk_resume_and_cancel_ask_first_and_report_each_run(db: st.Database) -> None:
    runs = failing_runs(db)
    queued = db.submit(workflow(), {"key": "down", "n": 9}).id
    db.reset(runs["down-0"], "fetch")  # interrupted: ready to resume
    browser = RunBrowser(db, workflows=[workflow({"down", "bad"})])
    ticks = {row[0]: browser.rows.children[i].children[0] for i, row in enumerate(_shown(browser))}
    assert browser.resume_runs.disabled
    for run_id in (runs["down-0"], runs["bad-3"], runs["flaky-4"]):
        ticks[run_id].value = True
    assert browser.resume_runs.description == "Resume 3…"
    browser.resume_runs.click()
    assert "Resume here 3 run(s)?" in text(browser.confirm_text.value)
    assert db.get_run(runs["down-0"]).status == "interrupted"  # nothing before Confirm
    browser.confirm_button.click()
    report = said(browser.report.value)
    assert f"run {runs['down-0']}: resumed; now finished" in report
    assert f"run {runs['bad-3']}: skipped: it failed; retry its failed step from" in report
    assert f"run {runs['flaky-4']}: skipped: it is finished" in report
    assert db.get_run(runs["down-0"]).status == "finished"
    assert db.get_run(runs["bad-3"]).status == "failed"
    assert browser.resume_runs.disabled  # the ticks went with the action

    ticks = {row[0]: browser.rows.children[i].children[0] for i, row in enumerate(_shown(browser))}
    ticks[queued].value = True
    ticks[runs["down-1"]].value = True
    browser.cancel_runs.click()
    browser.dismiss.click()  # "Keep them"
    assert db.get_run(queued).status == "queued"
    browser.cancel_runs.click()
    browser.confirm_button.click()
    report = said(browser.report.value)
    assert db.get_run(queued).status == "cancelled"
    assert f"run {queued}: cancel requested; now cancelled" in report
    assert f"run {runs['down-1']}: skipped: it is failed" in report


def _tick(browser: RunBrowser, *run_ids: str) -> None:
    ticks = {row[0]: browser.rows.children[i].children[0] for i, row in enumerate(_shown(browser))}
    for run_id in run_ids:
        ticks[run_id].value = True


def test_a_question_names_the_ticked_runs_and_those_the_filters_hide(db: st.Database) -> None:
    ids = _many(db, 3)
    runs = failing_runs(db)
    browser = RunBrowser(db)
    _tick(browser, ids[0], runs["bad-3"])
    browser.status.value = "failed"  # ids[0] (finished) is still ticked, now out of sight
    browser.delete_runs.click()
    question = said(browser.confirm_text.value)
    assert f"runs: {runs['bad-3']}, {ids[0]}" in question
    assert "(1 of them not shown with these filters and page)" in question
    browser.dismiss.click()
    assert db.get_run(ids[0]).status == "finished"


def test_bulk_delete_asks_first_and_deletes_by_retentions_rules(db: st.Database) -> None:
    runs = failing_runs(db)
    ids = _many(db, 2)
    fork = db.fork(ids[0], 1).id  # interrupted: its parent stays while it does
    queued = db.submit(workflow(), {"key": "down", "n": 9}).id
    browser = RunBrowser(db)
    _tick(browser, runs["down-0"], ids[0], ids[1], queued)
    assert browser.delete_runs.description == "Delete 4…"
    browser.delete_runs.click()
    assert "Delete 4 run(s) with their history? Retention's rules hold" in text(
        browser.confirm_text.value
    )
    browser.dismiss.click()  # "Keep them": nothing goes
    assert db.get_run(ids[1]).status == "finished"
    browser.delete_runs.click()
    browser.confirm_button.click()
    report = said(browser.report.value)
    assert f"run {runs['down-0']}: deleted" in report
    assert f"run {ids[1]}: deleted" in report
    assert f"run {ids[0]}: kept: 1 run(s) forked from it remain: delete them first" in report
    assert f"run {queued}: kept: it is queued: only finished, failed, cancelled runs" in report
    assert {r.id for r in db.runs(limit=100)} == (set(runs.values()) | {ids[0], fork, queued}) - {
        runs["down-0"]
    }
    assert runs["down-0"] not in {row[0] for row in _shown(browser)}  # the page read again
    assert db.verify().ok


def test_bulk_export_asks_for_a_file_and_writes_each_runs_history(
    db: st.Database, tmp_path: Path
) -> None:
    ids = _many(db, 3)
    browser = RunBrowser(db)
    _tick(browser, ids[0], ids[2])
    browser.export_runs.click()
    assert "Export the history of 2 run(s), as JSON lines" in text(browser.confirm_text.value)
    assert browser.export_path.layout.display is None  # the file name is asked with it
    target = tmp_path / "two.jsonl"
    browser.export_path.value = str(target)
    browser.confirm_button.click()
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    heads = [row["run_id"] for row in lines if row["type"] == "run"]
    assert heads == [ids[2], ids[0]]  # newest first, as ticked and listed
    for run_id in ids[0], ids[2]:
        frames = [r["frame_no"] for r in lines if r["type"] == "frame" and r["run_id"] == run_id]
        assert frames == [f.frame_no for f in db.store.frames(run_id)]
    count = len(lines) // 2
    report = said(browser.report.value)
    assert f"run {ids[2]}: {count} line(s)" in report and f"wrote {len(lines)} lines" in report

    _tick(browser, ids[1])  # the file exists now: said, and nothing is overwritten
    browser.export_runs.click()
    browser.export_path.value = str(target)
    browser.confirm_button.click()
    assert "already exists; choose another file name" in said(browser.report.value)
    assert len(target.read_text().splitlines()) == len(lines)


def test_a_page_read_for_older_filters_is_never_drawn_over_the_newest(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel may handle two filter changes at once on two threads (ipykernel 7 does):
    the text cleared on one, the status picked on the other. Here the older change's read is
    held (a real read, waiting before it returns) until the newer change's page was drawn; the
    table must end on the newer filters' runs, its page counter and note agreeing."""
    _many(db, 6)
    runs = failing_runs(db)
    failed = sorted((runs[k] for k in ("down-0", "down-1", "down-2", "bad-3")), reverse=True)
    browser = RunBrowser(db, text="plain")
    assert {row[1] for row in _shown(browser)} == {"echo"}
    real, held, drawn = _browser.run_listing, threading.Event(), threading.Event()

    def held_read(engine: Any, where: RunFilter, **kw: Any) -> Any:
        listing = real(engine, where, **kw)
        if not where.text and not where.statuses and not held.is_set():  # the older one
            held.set()
            assert drawn.wait(60)
        return listing

    monkeypatch.setattr(_browser, "run_listing", held_read)
    older = threading.Thread(target=lambda: setattr(browser.text, "value", ""))
    older.start()
    assert held.wait(60)  # the text cleared: its page is being read
    browser.status.value = "failed"  # meanwhile, on another thread: the newer filters
    drawn.set()
    older.join(60)

    assert [row[0] for row in _shown(browser)] == failed
    assert text(browser.page_label.value) == "page 1" and browser.note.value == ""
    assert browser.listing is not None and [r.run_id for r in browser.listing.runs] == failed


def test_picking_any_keeps_the_box_saying_any(db: st.Database) -> None:
    _many(db, 2)
    failing_runs(db)
    browser = RunBrowser(db, status="failed", workflow="echo")
    for box in (browser.status, browser.workflow):
        box.index = 0  # what the page sends when a person picks "any"
        assert box.index == 0 and box.label == "any"  # not an empty box
    assert len(_shown(browser)) == len(db.runs(limit=100))


@pytest.mark.parametrize("action", ["cancel", "resume"])
def test_bulk_actions_read_the_ticked_runs_together_not_one_by_one(
    db: st.Database, action: str
) -> None:
    """Cancel or Resume on 2, then 12 finished runs (of a workflow not given): each is
    skipped and reported, their rows read together (as many statements for 12 as for 2)."""
    ids = _many(db, 12)
    browser = RunBrowser(db, workflows=[workflow()])
    sent = {}
    for n in (2, 12):
        browser.selected.update(ids[:n])
        browser.ask(action)
        with statements(db) as seen:
            browser.carry_out()
        report = said(browser.report.value)
        assert all(f"run {r}: skipped: " in report for r in ids[:n]), report
        sent[n] = len(seen)
    assert sent[12] == sent[2], sent


def test_the_browser_and_the_runs_command_count_a_runs_frames_alike(
    db: st.Database, db_url: str
) -> None:
    """Frames 0 to N are N + 1 frames: in the browser's column, `smithers-tt runs` and the
    demo's table alike (the command once said N beside a browser saying N + 1)."""
    runs = failing_runs(db)
    forked = db.fork(runs["flaky-4"], 3).id
    browser = RunBrowser(db)
    seen = {row[0]: row[6] for row in _shown(browser)}
    result = CliRunner().invoke(cli, ["--db", db_url, "--wide", "runs"])
    assert result.exit_code == 0, result.output
    head, *lines = result.output.splitlines()
    at = head.index("frames")  # the column as a person reads it, under its header
    said = {li.split()[0]: li[at:].split()[0] for li in lines}
    for run_id in [*runs.values(), forked]:
        count = str(len(db.get_run(run_id).frames()))
        assert seen[run_id] == count and said[run_id] == count, (run_id, seen, said)
