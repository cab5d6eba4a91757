"""``smithers-tt serve`` without a browser: the options become Voila's command line and the
page kernel's environment, the store is checked before Voila starts, and the page its
notebook shows cannot change the store unless ``--allow-actions`` was given (issue 35, item 5).
The page in a real browser: ``tests/widgets/test_serve_browser.py``."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt.cli import _maintenance, _serve, cli
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import StoreReadOnly
from smithers_tt.widgets import Debugger, RunBrowser, served_page


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What ``serve`` would have started, Voila's command and environment, instead of it."""
    calls: list[dict[str, Any]] = []

    def run(command: list[str], env: dict[str, str]) -> int:
        (cell,) = json.loads(Path(command[3]).read_text())["cells"]  # the page's notebook
        calls.append({"command": command, "env": env, "cell": cell["source"]})
        return 0

    monkeypatch.setattr(_serve, "_run_until_stopped", run)
    return calls


def serve(db_url: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--db", db_url, "serve", *args])


def options(command: list[str]) -> dict[str, str]:
    return dict(arg.removeprefix("--").split("=", 1) for arg in command if "=" in arg)


def test_serve_listens_on_this_machine_read_only_by_default(
    db_url: str, db: st.Database, started: list[dict[str, Any]]
) -> None:
    result = serve(db_url)

    assert result.exit_code == 0, result.output
    (call,) = started
    assert call["command"][1:3] == ["-m", "voila"]
    given = options(call["command"])
    assert given["Voila.ip"] == "127.0.0.1" and given["port"] == "8866"
    assert given["Voila.port_retries"] == "0" and given["template"] == "smithers-tt"
    assert "--no-browser" not in call["command"]
    assert call["env"]["SMITHERS_TT_DB"] == db_url
    assert call["env"][_serve.ACTIONS_ENV] == "0"
    assert call["env"]["JUPYTER_PATH"].split(":")[0] == str(_serve.TEMPLATES)
    assert "read-only" in result.output and "http://127.0.0.1:8866/" in result.output
    assert "warning" not in result.output


def test_serve_options_reach_voila(db_url: str, db: st.Database, started: list[dict]) -> None:
    result = serve(db_url, "--port", "9123", "--no-browser", "--allow-actions")

    assert result.exit_code == 0, result.output
    (call,) = started
    assert options(call["command"])["port"] == "9123"
    assert "--no-browser" in call["command"]
    assert call["env"][_serve.ACTIONS_ENV] == "1"
    assert "actions allowed" in result.output


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "example.org"])
def test_serve_warns_when_other_machines_can_open_the_page(
    db_url: str, db: st.Database, started: list[dict], host: str
) -> None:
    result = serve(db_url, "--host", host)

    assert result.exit_code == 0, result.output
    assert options(started[0]["command"])["Voila.ip"] == host
    assert f"warning: listening on {host}" in result.output


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_a_loopback_host_is_not_warned_about(host: str) -> None:
    assert _serve.is_loopback(host)


@pytest.mark.parametrize("port", ["0", "70000", "http"])
def test_serve_refuses_a_port_that_cannot_be(db_url: str, started: list[dict], port: str) -> None:
    result = serve(db_url, "--port", port)

    assert result.exit_code == 2 and "--port" in result.output
    assert started == []


def test_serve_without_a_store_says_so_and_starts_nothing(
    tmp_path: Path, started: list[dict]
) -> None:
    missing = tmp_path / "none.db"

    result = serve(str(missing))

    assert result.exit_code == 1 and "no store at" in result.output
    assert started == [] and not missing.exists()


def page_db(cell: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> st.Database:
    """Run the page notebook's cell as its kernel would (with ``env``); the store it opened."""
    return page_of(cell, env, monkeypatch)[0]


def page_of(
    cell: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, query: str = ""
) -> tuple[st.Database, Any]:
    """:func:`page_db`, and the page the cell shows for ``query`` (its last expression)."""
    for name in ("SMITHERS_TT_DB", _serve.ACTIONS_ENV, _serve.PRICES_ENV):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("QUERY_STRING", query)
    namespace: dict[str, Any] = {}
    body = ast.parse(cell)
    last = body.body.pop()
    assert isinstance(last, ast.Expr)
    exec(compile(body, "page", "exec"), namespace)
    return namespace["db"], eval(compile(ast.Expression(last.value), "page", "eval"), namespace)


def test_serve_prices_reach_the_pages_debuggers(
    db_url: str,
    db: st.Database,
    started: list[dict],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    wf, _ = demo_workflow(flaky=True)
    run = db.run(wf, {"topic": "bee"})
    table = tmp_path / "prices.toml"
    table.write_text('["demo-large"]\ninput = 1.0\noutput = 2.0\n')
    monkeypatch.chdir(tmp_path)  # a relative path: the page's kernel runs in another folder

    result = serve(db_url, "--prices", "prices.toml")

    assert result.exit_code == 0, result.output
    env = started[0]["env"]
    assert env[_serve.PRICES_ENV] == str(table)
    page, shown = page_of(started[0]["cell"], env, monkeypatch, f"run={run.id}")
    try:
        dbg = shown.children[1]
        expected = db.debug(run.id, live=False, prices=table)
        assert dbg.header.value == expected.header.value and "$" in dbg.header.value
        expected.close()
        dbg.close()
    finally:
        page.close()
    assert serve(db_url).exit_code == 0  # without --prices: no table, no cost shown
    assert started[1]["env"][_serve.PRICES_ENV] == ""


def test_serve_prices_the_demo_by_the_table_the_demo_wrote_beside_its_database(
    db_url: str, db: st.Database, started: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not db_url.startswith("sqlite:///"):
        pytest.skip("the demo writes its prices beside a SQLite file")
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bee"})
    written = Path(_maintenance._write_demo_prices(db_url)).resolve()  # as `demo` does

    result = serve(db_url)  # no --prices: the person ran `demo`, then `serve`

    assert result.exit_code == 0, result.output
    assert f"model calls priced by {written}" in result.output
    page, shown = page_of(started[0]["cell"], started[0]["env"], monkeypatch, f"run={run.id}")
    try:
        header = shown.children[1].header.value
        assert "$" in header and "no cost" not in header and "without a price" not in header
        shown.children[1].close()
    finally:
        page.close()


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "cannot be read"), ("{not json", "is not valid"), ("[1, 2]", "must map model")],
)
def test_serve_refuses_a_price_table_it_cannot_read_and_starts_nothing(
    db_url: str,
    db: st.Database,
    started: list[dict],
    tmp_path: Path,
    content: str | None,
    said: str,
) -> None:
    table = tmp_path / "prices.json"
    if content is not None:
        table.write_text(content)

    result = serve(db_url, "--prices", str(table))

    assert result.exit_code == 1 and said in result.output and "Traceback" not in result.output
    assert started == []


def test_the_served_page_cannot_change_the_store(
    db_url: str, db: st.Database, started: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    clock = db.get_run(run_id).record.clock
    assert serve(db_url).exit_code == 0
    page = page_db(started[0]["cell"], started[0]["env"], monkeypatch)
    try:
        shown = served_page(page, f"run={run_id[:8]}&frame=3").children[1]
        assert isinstance(shown, Debugger) and shown.model.frame_no == 3

        shown.actions.rewind.click()  # disabled in the page; a click that gets through anyway
        assert shown.model.pending is None and "Nothing was done" in shown.actions.report.value
        with pytest.raises(StoreReadOnly):
            page.fork(run_id, 3)
        browser = served_page(page, "").children[1]
        assert isinstance(browser, RunBrowser)
        assert browser.cancel_runs.disabled and "read-only" in browser.cancel_runs.tooltip
        assert "Actions are off" in browser.report.value
        assert all(button.disabled for button in browser.action_buttons.values())
        browser.selected.add(run_id)
        for action in ("delete", "export", "cancel"):  # asked from Python: refused all the same
            browser.ask(action)
            assert browser.pending is None and "Actions are off" in browser.report.value
    finally:
        page.close()
    assert db.get_run(run_id).record.clock == clock and len(db.runs()) == 1


def test_the_page_with_actions_allowed_can_rewind(
    db_url: str, db: st.Database, started: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    assert serve(db_url, "--allow-actions").exit_code == 0
    page = page_db(started[0]["cell"], started[0]["env"], monkeypatch)
    try:
        shown = served_page(page, f"run={run_id}&frame=4").children[1]
        assert not shown.actions.rewind.disabled
        shown.actions.rewind.click()
        shown.actions.confirm.click()
    finally:
        page.close()
    assert db.get_run(run_id).record.clock == 4


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("run=zzzzzzzz", "no run 'zzzzzzzz'"),
        ("run={run}&frame=999", "has no frame 999: its frames are 0 to"),
        ("run={run}&frame=-1", "frame must be a whole number"),
        ("frame=2", "names no run"),
    ],
)
def test_an_address_the_store_cannot_answer_says_why_above_the_run_browser(
    db: st.Database, query: str, said: str
) -> None:
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "<b>bee</b>"}).id

    page = served_page(db, query.format(run=run_id))

    head, body = page.children[0].value, page.children[1]
    assert said.replace("'", "&#x27;") in head and isinstance(body, RunBrowser)
