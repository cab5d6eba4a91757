"""Ids are checked up front, the same on both backends: a NUL, a lone surrogate, more than the
200 characters of an id column, or an empty run id is refused with ``InvalidArgument`` before
anything is written, instead of SQLite keeping what PostgreSQL refuses in the middle of a run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt._ids import MAX_ID_CHARS
from smithers_tt.errors import InvalidArgument
from smithers_tt.store.backend import _schema as S

BAD = {
    "nul": "a\x00b",
    "lone_surrogate": "a\ud800b",
    "too_long": "x" * (MAX_ID_CHARS + 1),
}
BAD_IDS = pytest.mark.parametrize("bad", list(BAD.values()), ids=list(BAD))


class Echo:
    """An agent answering with its input, publishing one checkpoint first."""

    def __init__(self, agent_id: str = "echo", codec: str = "test.echo") -> None:
        self.id = agent_id
        self.checkpoint_formats = [st.CheckpointFormat(codec, [1])]
        self.codec = codec

    async def generate(self, request: st.GenerateRequest) -> st.GenerateResult:
        await request.on_checkpoint(st.AgentCheckpoint(self.codec, 1, {"seen": request.input}))
        return st.GenerateResult({"echo": request.input})


def workflow(name: str = "ids", task: str = "echo", agent: Any = None) -> st.Workflow:
    wf = st.Workflow(name)
    wf.task(task, agent=agent or Echo())
    return wf


def _nothing_stored(db: st.Database) -> bool:
    return db.store.list_runs(limit=10).items == []


def test_every_id_column_is_as_wide_as_the_id_rule() -> None:
    widths = {
        f"{table.name}.{column.name}": column.type.length
        for table in S.metadata.sorted_tables
        for column in table.columns
        if column.name in ("run_id", "parent_run_id", "resumed_run_id", "node_id", "workflow")
        or column.name in ("resumed_node_id", "codec", "agent_id")
    }
    assert widths and set(widths.values()) == {MAX_ID_CHARS}, widths


def test_a_run_id_that_cannot_be_an_id_is_refused_before_anything_is_written(
    db: st.Database,
) -> None:
    for bad in ["", *BAD.values()]:
        with pytest.raises(InvalidArgument, match="run_id"):
            db.run(workflow(), {"x": 1}, run_id=bad)
    assert _nothing_stored(db)


@BAD_IDS
@pytest.mark.parametrize(
    "define",
    [
        pytest.param(lambda bad: workflow(name=bad), id="workflow"),
        pytest.param(lambda bad: workflow(task=bad), id="task"),
        pytest.param(lambda bad: workflow(agent=Echo(agent_id=bad)), id="agent"),
    ],
)
def test_a_workflow_task_or_agent_id_that_cannot_be_an_id_is_refused_at_definition(
    bad: str, define: Callable[[str], st.Workflow]
) -> None:
    with pytest.raises(InvalidArgument, match=r"id|name"):
        define(bad)


@pytest.mark.parametrize("bad", [BAD["nul"], BAD["too_long"]], ids=["nul", "too_long"])
@pytest.mark.parametrize("declare", [st.CheckpointFormat, st.CheckpointCapability])
def test_a_codec_that_cannot_be_an_id_is_refused_at_declaration(bad: str, declare: Any) -> None:
    with pytest.raises(InvalidArgument, match="codec"):
        declare(bad, [1])


LOOKUPS = {
    "get_run": lambda db, bad: db.get_run(bad),
    "snapshot": lambda db, bad: db.snapshot(bad),
    "timeline": lambda db, bad: db.timeline(bad),
    "cancel": lambda db, bad: db.cancel(bad),
    "rewind": lambda db, bad: db.rewind(bad, 0, confirm=True),
    "fork": lambda db, bad: db.fork(bad, 0),
    "reset": lambda db, bad: db.reset(bad, "echo"),
    "resume": lambda db, bad: db.resume(bad, workflow()),
}


def _refuses(call: Callable[[], Any], match: str) -> bool:
    try:
        call()
    except InvalidArgument as error:
        return match in str(error)
    except Exception:  # anything else (RunNotFound, StoreError, UnicodeEncodeError) is wrong
        return False
    return False


def test_every_database_method_refuses_a_run_id_that_cannot_be_an_id(db: st.Database) -> None:
    accepted = [
        (name, kind)
        for name, call in LOOKUPS.items()
        for kind, bad in BAD.items()
        if not _refuses(lambda call=call, bad=bad: call(db, bad), "run_id")
    ]
    assert accepted == []


def test_fork_and_reset_refuse_a_node_id_that_cannot_be_an_id(db: st.Database) -> None:
    run = db.run(workflow(), {"x": 1})
    accepted = [
        (name, kind)
        for kind, bad in BAD.items()
        for name, call in {
            "fork reset": lambda bad=bad: db.fork(run.id, 0, reset=[bad]),
            "fork checkpoints": lambda bad=bad: db.fork(run.id, 0, checkpoints={bad: None}),
            "reset": lambda bad=bad: db.reset(run.id, bad),
        }.items()
        if not _refuses(call, "node id")
    ]
    assert accepted == []
    assert [r.run_id for r in db.store.list_runs(limit=10).items] == [run.id]


def test_ids_of_the_full_width_run_end_to_end_on_both_backends(db: st.Database) -> None:
    wide = "é" * MAX_ID_CHARS  # 200 characters, 400 bytes: the limit is in characters
    wf = workflow(name=wide, task=wide, agent=Echo(agent_id=wide, codec=wide))
    run = db.run(wf, {"x": 1}, run_id=wide)
    assert run.status == "finished", run.error
    (ref,) = db.store.list_refs(wide, limit=10).items
    assert (ref.run_id, ref.node_id, ref.codec, ref.agent_id) == (wide, wide, wide, wide)
    assert db.get_run(wide).record.workflow == wide
