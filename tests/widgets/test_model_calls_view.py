"""The debugger's model calls: the waterfall of the selected frame's calls, a call's request
and reply (escaped, with the diff against the previous call), and the totals in the header,
read as a person sees them (the HTML text) on SQLite and PostgreSQL (the ``db`` fixture)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.checkpoint import CheckpointFormat
from smithers_tt.demo import DEMO_PRICES, demo_workflow
from smithers_tt.engine import GenerateRequest, GenerateResult
from smithers_tt.widgets import Debugger
from smithers_tt.widgets._calls import millis, money

from ._support import SCRIPT


@pytest.fixture
def demo_run(db: st.Database) -> st.Run:
    """A finished demo run: a 429 then 200 in its research, calls in every node."""
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run = db.run(wf, {"topic": "bee"})
    assert run.status == "finished"
    return run


def _open(db: st.Database, run_id: str, **kw: Any) -> Debugger:
    return db.debug(run_id, live=False, **kw)


def _text(value: str) -> str:
    """What a person reads in an HTML value: its text, unescaped, spaces collapsed."""
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", value)).split())
    return re.sub(r" ([:)])", r"\1", text)


def _rows(dbg: Debugger) -> list[list[str]]:
    """The waterfall's rows as the cells' texts."""
    table = dbg.calls.waterfall.value
    rows = re.findall(r'<tr class="stt-call-row[^"]*"[^>]*>(.*?)</tr>', table, flags=re.S)
    return [[_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, flags=re.S)] for r in rows]


def _expected(run: st.Run, frame_no: int) -> list[list[str]]:
    """The rows the waterfall should show at ``frame_no``: from ``run.model_calls()``."""
    df = run.model_calls(frame_no=frame_no)
    out = []
    for n, c in enumerate(df.itertuples(), 1):
        tokens = "?" if c.total_tokens is pd_na() else f"{int(c.total_tokens):,}"
        status = "" if c.status is pd_na() else str(int(c.status))
        if isinstance(c.error, str):
            status = f"{status} {c.error}"
        node = f"{c.node_id} a{c.attempt}" + (" (inherited)" if c.inherited else "")
        out.append([f"#{n}", node, c.model, millis(c.latency_ms), tokens, status])
    return out


def pd_na() -> Any:
    import pandas

    return pandas.NA


def _seen(rows: list[list[str]]) -> list[list[str]]:
    """A row without its start and bar cells (the start is relative, checked apart)."""
    return [[r[0], r[1], r[2], r[5], r[6], r[7]] for r in rows]


def _ids(dbg: Debugger) -> list[str]:
    """The calls the waterfall's rows name (what a click on a row chooses)."""
    table = dbg.calls.waterfall.value
    return re.findall(r'<tr class="stt-call-row[^"]*" data-call="([^"]+)">', table)


def _header(dbg: Debugger) -> str:
    return _text(dbg.header.value)


def _same_place(dbg: Debugger) -> None:
    """The calls view shows the run and frame the debugger (and its header) shows."""
    m = dbg.model
    assert dbg.calls.shown == (m.run_id, m.frame_no)
    head = _header(dbg)
    assert f"Run {m.short_ids().get(m.run_id, m.run_id)}" in head
    if dbg.calls.calls:
        assert f"model calls at frame {m.frame_no}:" in head


def test_the_waterfall_shows_the_calls_the_selected_frame_has_seen(
    db: st.Database, demo_run: st.Run
) -> None:
    dbg = _open(db, demo_run.id)
    every = demo_run.model_calls()
    assert _seen(_rows(dbg)) == _expected(demo_run, demo_run.record.clock)
    # each heading stands over its column: "latency" over the bar and the figure
    heads = re.findall(r'<th(?: colspan="(\d)")?>([^<]*)</th>', dbg.calls.waterfall.value)
    columns = [name for span, name in heads for _ in range(int(span or 1))]
    assert len(columns) == len(_rows(dbg)[0])
    assert [columns[i] for i in (3, 4, 5, 6)] == ["start", "latency", "latency", "tokens"]
    assert len(_rows(dbg)) == len(every) > 3
    # the 429 is marked as failed, in the error colour, with its status
    failed = re.findall(
        r'<tr class="stt-call-row stt-call-failed"[^>]*>(.*?)</tr>', dbg.calls.waterfall.value, re.S
    )
    assert len(failed) == int((every.status >= 400).sum()) == 1
    assert "429 HTTP 429" in _text(failed[0])
    # earlier frames see fewer calls: selecting, scrubbing and stepping redraw for the frame
    middle = int(every.frame_no.iloc[len(every) // 2])
    dbg.select_frame(middle)
    assert _seen(_rows(dbg)) == _expected(demo_run, middle)
    _same_place(dbg)
    first = int(every.frame_no.min())
    dbg.scrubber.slider.value = first - 1
    assert _rows(dbg) == [] and "no model calls at this frame" in _text(dbg.calls.waterfall.value)
    assert "model calls at frame" not in _header(dbg)
    _same_place(dbg)
    dbg.model.step(1)
    assert _seen(_rows(dbg)) == _expected(demo_run, first)
    _same_place(dbg)
    # the first call starts the scale; every start is after it
    starts = [r[3] for r in _rows(dbg)]
    assert starts[0] == "+0.0 ms" and all(s.startswith("+") for s in starts)
    dbg.close()


def test_totals_in_the_header_equal_the_dataframes_sums(db: st.Database, demo_run: st.Run) -> None:
    unpriced = _open(db, demo_run.id)  # no table given: tokens, and no cost anywhere
    assert "no cost" in _header(unpriced) and "$" not in _text(_header(unpriced))
    unpriced.close()
    dbg = _open(db, demo_run.id, prices=DEMO_PRICES)
    df = demo_run.model_calls(DEMO_PRICES)
    head = _header(dbg)
    assert f"model calls at frame {demo_run.record.clock}: {len(df)} call(s)" in head
    assert f"{int(df.total_tokens.sum()):,} tokens" in head
    assert money(float(df.cost.sum())) in head
    assert f"model time {millis(float(df.latency_ms.sum()))}" in head
    assert "1 failed" in head
    for node, rows in df.groupby("node_id"):
        line = next(
            li for li in re.findall(r"<li>(.*?)</li>", dbg.header.value) if f"<b>{node}</b>" in li
        )
        seen = _text(line)
        assert f"{len(rows)} call(s)" in seen
        assert f"{int(rows.total_tokens.sum()):,} tokens" in seen
        assert money(float(rows.cost.sum())) in seen
    # the prices given to db.debug are the ones used: none known, no cost shown, never a guess
    dbg.close()
    cheap = _open(db, demo_run.id, prices={"demo-large": {"input": 1.0, "output": 1.0}})
    large = df[df.model == "demo-large"]
    cost = float((large.prompt_tokens + large.completion_tokens).sum()) / 1e6
    head = _header(cheap)
    assert money(cost) in head
    unpriced = int(((df.model != "demo-large") & df.total_tokens.notna()).sum())
    assert f"({unpriced} call(s) of models without a price)" in head
    cheap.close()


class Caller:
    """Records model calls of a model no price table names, with markup in every payload."""

    id = "caller"
    checkpoint_formats = [CheckpointFormat("steps", (1,))]

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        ask = [{"role": "system", "content": "be brief"}, {"role": "user", "content": SCRIPT}]
        request.record_model_call(
            model=f"mystery{SCRIPT}", request=ask, status=429, error=f"slow down {SCRIPT}",
            latency_ms=2.0,
        )  # fmt: skip
        request.record_model_call(
            model=f"mystery{SCRIPT}", request=[*ask, {"role": "user", "content": "again"}],
            reply={"role": "assistant", "content": f"reply {SCRIPT}"}, status=200,
            prompt_tokens=12, completion_tokens=5, latency_ms=7.0,
        )  # fmt: skip
        await request.on_checkpoint(AgentCheckpoint("steps", 1, {"step": 1}))
        return GenerateResult("done")


def _caller_run(db: st.Database) -> st.Run:
    wf = st.Workflow("caller")
    wf.task("ask", agent=Caller())
    run = db.run(wf)
    assert run.status == "finished"
    return run


def test_a_calls_request_and_reply_show_escaped_with_the_diff_against_the_previous_call(
    db: st.Database,
) -> None:
    run = _caller_run(db)
    dbg = _open(db, run.id)
    values = [dbg.calls.waterfall.value, dbg.header.value]
    ids = _ids(dbg)
    assert len(ids) == 2
    dbg.calls.waterfall.selected = ids[1]  # as a click on its row sets it
    detail = dbg.calls.detail.value
    for value in (*values, detail):
        assert "<script>" not in value
    assert SCRIPT in _text(detail) and f"reply {SCRIPT}" in _text(detail)
    assert "&lt;script&gt;" in detail
    seen = _text(detail)
    # the request's diff against call #1: the new message added, the two others unchanged
    assert "against call #1" in seen and "2 unchanged message(s)" in seen and "+ user again" in seen
    dbg.calls.show_call(ids[0])
    seen = _text(dbg.calls.detail.value)
    assert f"slow down {SCRIPT}" in seen and "no earlier call of this node" in seen
    assert "Reply not recorded" in seen
    # a model no table names: tokens, and no cost
    head = _header(dbg)
    assert "no cost" in head and "$" not in head and "17 tokens" in head
    assert "(1 call(s) of models without a price)" in head
    df = run.model_calls(DEMO_PRICES)
    assert df.cost.isna().all()
    dbg.close()


def test_a_fork_shows_its_inherited_calls_and_a_rewind_hides_the_removed_ones(
    db: st.Database, demo_run: st.Run
) -> None:
    dbg = _open(db, demo_run.id)
    every = demo_run.model_calls()
    research_end = int(every[every.node_id == "research"].frame_no.max())
    dbg.select_frame(research_end)
    dbg.model.request_fork()
    result = dbg.model.confirm()
    assert result is not None and result.ok
    child = db.get_run(result.run_id)
    dbg.model.switch_run(child.id)  # as opening it in the fork tree does
    _same_place(dbg)
    rows = _rows(dbg)
    assert _seen(rows) == _expected(child, dbg.model.frame_no)
    assert rows and all(r[1].endswith("(inherited)") for r in rows)
    assert len(rows) == int((every.frame_no <= research_end).sum())
    # back to the parent; rewind it to the end of its research: the later calls are gone
    dbg.model.switch_run(demo_run.id)
    dbg.select_frame(research_end)
    dbg.model.request_rewind()
    result = dbg.model.confirm()
    assert result is not None and result.ok
    _same_place(dbg)
    assert dbg.model.frame_no == research_end == dbg.model.last_frame
    shown = _seen(_rows(dbg))
    assert shown == _expected(demo_run, research_end)
    assert all(r[1].startswith("research a") for r in shown) and len(shown) < len(every)
    assert len(shown) == len(demo_run.model_calls())  # the newest frame: removed calls gone
    assert f"{len(shown)} call(s)" in _header(dbg)
    dbg.close()


def test_a_long_list_shows_the_newest_calls_numbered_among_all(
    db: st.Database, demo_run: st.Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("smithers_tt.widgets._calls.ROWS_SHOWN", 3)
    dbg = _open(db, demo_run.id)
    every = _expected(demo_run, demo_run.record.clock)
    assert _seen(_rows(dbg)) == every[-3:]
    assert f"{len(every) - 3} earlier call(s) not shown" in _text(dbg.calls.waterfall.value)
    assert f"{len(every)} call(s)" in _header(dbg)  # the totals count them all
    dbg.close()


def _detail(dbg: Debugger) -> str:
    return _text(dbg.calls.detail.value)


def test_the_call_clicked_stays_chosen_while_the_frame_shown_sees_it_and_no_longer(
    db: st.Database, demo_run: st.Run
) -> None:
    dbg = _open(db, demo_run.id)
    every = demo_run.model_calls()
    ids = _ids(dbg)
    assert len(ids) == len(every) and dbg.calls.waterfall.selected == "" and _detail(dbg) == ""
    # a click on the first call of the second node: its request and reply, numbered as shown
    second = every.node_id.ne(every.node_id.iloc[0]).idxmax()
    dbg.calls.waterfall.selected = ids[second]  # what the view sets on a click on its row
    call = dbg.calls.calls[second]
    request, reply = dbg.calls.reads.model_call_exchange(call)
    seen = _detail(dbg)
    assert seen.startswith(f"Call #{second + 1} {call.model} · {call.node_id} attempt")
    assert _text(str(request[-1]["content"])) in seen
    assert _text(str(reply["content"])) in seen
    # a later frame still sees it: still chosen, the same call shown
    dbg.select_frame(dbg.model.last_frame - 1)
    assert dbg.calls.waterfall.selected == ids[second] and _detail(dbg) == seen
    # a frame before it was made: unchosen, nothing shown; scrubbing back does not bring it back
    made = int(every.frame_no.iloc[second])
    dbg.scrubber.slider.value = made - 1
    _same_place(dbg)
    assert ids[second] not in _ids(dbg)
    assert dbg.calls.waterfall.selected == "" and _detail(dbg) == ""
    dbg.scrubber.slider.value = made
    assert ids[second] in _ids(dbg) and dbg.calls.waterfall.selected == ""
    # a click that arrives after its row went away (a stale view) chooses nothing
    dbg.calls.waterfall.selected = ids[-1]
    assert dbg.calls.waterfall.selected == "" and _detail(dbg) == ""
    # the newest call chosen, then a frame before it selected: unchosen
    dbg.select_frame(dbg.model.last_frame)
    dbg.calls.show_call(ids[-1])
    assert _detail(dbg).startswith(f"Call #{len(ids)} ")
    dbg.select_frame(made)
    assert dbg.calls.waterfall.selected == ""
    # rewound to a frame that saw the chosen call: kept; to one before it: unchosen
    dbg.calls.show_call(ids[second])
    for frame_no, kept in ((made, True), (made - 1, False)):
        dbg.select_frame(frame_no)
        dbg.model.request_rewind()
        result = dbg.model.confirm()
        assert result is not None and result.ok
        _same_place(dbg)
        assert (ids[second] in _ids(dbg)) is kept
        assert dbg.calls.waterfall.selected == (ids[second] if kept else "")
        assert (_detail(dbg) != "") is kept
    # the first call chosen, then a fork of this frame opened: it inherited it, still chosen
    dbg.calls.show_call(ids[0])
    first = _detail(dbg)
    dbg.model.request_fork()
    result = dbg.model.confirm()
    assert result is not None and result.ok
    dbg.model.switch_run(result.run_id)
    _same_place(dbg)
    assert dbg.calls.waterfall.selected == ids[0] and first.startswith("Call #1 ")
    assert _detail(dbg).replace(" (inherited)", "") == first
    dbg.close()
