"""Worker processes sharing one database: ``python -m smithers_tt.cli worker`` for real.

* SQLite: two worker processes on one file execute 20 submitted runs, each exactly once.
* PostgreSQL (the real server; must run in CI): four worker processes execute 200 submitted
  runs while two of them are killed with SIGKILL at seeded random moments (while they hold
  runs; when the queue ran dry before a kill, 16 more runs are submitted) and restarted.
  Every run finishes exactly once, each node has exactly one finished attempt, no two owners
  ever had attempts of one node in progress at the same time, every run a dead worker held
  is taken over once under a higher epoch, and every checkpoint a worker acknowledged is in
  the database and verifies. ``SMITHERS_TT_WORKERS_SEED``,
  ``SMITHERS_TT_WORKERS_RUNS`` and ``SMITHERS_TT_WORKERS_KILLS_EACH`` change the trial.

* PostgreSQL: a worker paused with SIGSTOP longer than the stale timeout is taken over, and
  after SIGCONT it is fenced out: it writes nothing more, learns it lost its runs, and exits
  cleanly on SIGTERM.

The workers load ``tests.workers._flows:logged`` (the demo workflow whose agents log calls and
acknowledged checkpoints to one file per process), so they run with the repository root as
their working directory.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.checkpoint import content_hash
from smithers_tt.store.backend import _schema as S

from ._flows import DELAY_ENV, LOG_ENV, logged

ROOT = Path(__file__).resolve().parents[2]
FLOW = "tests.workers._flows:logged"
SEED = int(os.environ.get("SMITHERS_TT_WORKERS_SEED", "20261130"))


# --- worker processes ----------------------------------------------------------------------


class Proc:
    """One ``smithers-tt worker`` process, its output in files."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], out: Path, err: Path) -> None:
        self.name, self.popen, self.out, self.err = name, popen, out, err

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def worker_id(self) -> str:
        return self.name

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")


class Fleet:
    """Starts worker processes and makes sure none outlives the test."""

    def __init__(self, tmp: Path, url: str, step_delay: float) -> None:
        self.tmp, self.url = tmp, url
        self.logs = tmp / "logs"
        self.logs.mkdir()
        self.env = {
            **os.environ,
            LOG_ENV: str(self.logs),
            DELAY_ENV: str(step_delay),
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
            ),
        }
        self.procs: list[Proc] = []

    def session_url(self, name: str) -> str:
        """The store URL worker ``name`` connects with: on PostgreSQL its sessions carry its
        name (``application_name``), so a test can tell when a killed worker's sessions are
        gone from the server (and with them any transaction it had sent)."""
        if not self.url.startswith("postgresql"):
            return self.url
        return f"{self.url}{'&' if '?' in self.url else '?'}application_name={session_name(name)}"

    def start(self, name: str, *options: str) -> Proc:
        out, err = self.tmp / f"{name}.out", self.tmp / f"{name}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "smithers_tt.cli",
                    "--db",
                    self.session_url(name),
                    "worker",
                    "--workflows",
                    FLOW,
                    "--id",
                    name,
                    *options,
                ],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
            )
        proc = Proc(name, popen, out, err)
        self.procs.append(proc)
        return proc

    def stop(self, proc: Proc, timeout: float = 60.0) -> int:
        """SIGTERM (continuing it first if it is stopped); its exit code.

        Python's own start (before the worker command runs) has no handler yet, so a process
        that has not announced itself is given the time to start first.
        """
        deadline = time.monotonic() + timeout
        while proc.popen.poll() is None and "SIGTERM stops it" not in proc.stderr():
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGCONT)
            proc.popen.send_signal(signal.SIGTERM)
        return proc.popen.wait(timeout)

    def close(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGCONT)
                proc.popen.kill()
                proc.popen.wait(30)

    def log_lines(self) -> dict[int, list[list[str]]]:
        """Each worker process's agent log (complete lines), by pid."""
        logs = {}
        for path in self.logs.glob("*.log"):
            text = path.read_text()
            logs[int(path.stem)] = [
                line.split() for line in text[: text.rfind("\n") + 1].splitlines()
            ]
        return logs


@pytest.fixture
def fleet_factory(tmp_path: Path) -> Iterator[Callable[[str, float], Fleet]]:
    fleets: list[Fleet] = []

    def make(url: str, step_delay: float) -> Fleet:
        fleet = Fleet(tmp_path, url, step_delay)
        fleets.append(fleet)
        return fleet

    try:
        yield make
    finally:
        for fleet in fleets:
            fleet.close()


def _wait(check: Callable[[], Any], timeout: float, what: str, procs: list[Proc] = ()) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        for proc in procs:
            if proc.popen.poll() is not None:
                raise AssertionError(
                    f"worker {proc.name} exited ({proc.popen.returncode}) while waiting for "
                    f"{what}:\n{proc.stderr()[-3000:]}"
                )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


# --- reading the database ------------------------------------------------------------------


def session_name(worker: str) -> str:
    """The ``application_name`` of worker ``worker``'s PostgreSQL sessions."""
    return f"fleet-{worker}"


def _sessions_of(db: st.Database, worker: str) -> int:
    """How many server sessions worker ``worker`` still has (killed: until the server has
    carried out, or dropped, what it had already sent)."""
    stmt = sa.text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")
    return _rows(db, stmt.bindparams(name=session_name(worker)))[0][0]


def _rows(db: st.Database, stmt: sa.Executable) -> list[Any]:
    return db.engine.transaction(lambda conn: conn.execute(stmt).all(), write=False)


def _status_counts(db: st.Database) -> Counter[str]:
    r = S.runs
    return Counter(
        dict(_rows(db, sa.select(r.c.status, sa.func.count()).group_by(r.c.status)))  # type: ignore[arg-type]
    )


def _owned_by(db: st.Database, worker_id: str) -> int:
    r = S.runs
    stmt = sa.select(sa.func.count()).where(r.c.status == "running", r.c.owner_id == worker_id)
    return _rows(db, stmt)[0][0]


def check_exactly_once(
    db: st.Database, run_ids: list[str], logs: dict[int, list[list[str]]]
) -> dict[str, Any]:
    """The invariants every worker test shares; returns figures for more specific checks."""
    r, a, f, n, refs = S.runs, S.attempts, S.frames, S.nodes, S.refs
    statuses = dict(_rows(db, sa.select(r.c.run_id, r.c.status)))
    assert set(statuses) == set(run_ids)
    assert Counter(statuses.values()) == Counter({"finished": len(run_ids)})

    # Every run ended exactly once, as finished.
    ends = Counter(
        (row.run_id, row.kind)
        for row in _rows(
            db,
            sa.select(f.c.run_id, f.c.kind).where(
                f.c.kind.in_(("run_finished", "run_failed", "run_cancelled"))
            ),
        )
    )
    assert ends == Counter({(run_id, "run_finished"): 1 for run_id in run_ids})

    # Frames are dense; claims have growing epochs; an attempt is interrupted only by the
    # claim that took its run over, in that claim's transaction (its frame follows the
    # run_claimed frame of a higher epoch).
    frames_of: dict[str, list[Any]] = defaultdict(list)
    for row in _rows(db, sa.select(f).order_by(f.c.run_id, f.c.frame_no)):
        frames_of[row.run_id].append(row)
    owners: dict[tuple[str, int], str] = {}
    claim_epochs: dict[str, list[int]] = {}
    node_recorded: set[tuple[str, str, int, int]] = set()
    interrupted_by: dict[tuple[str, str, int, int], int] = {}
    takeovers = 0
    for run_id, frames in frames_of.items():
        epochs = claim_epochs.setdefault(run_id, [])
        for i, frame in enumerate(frames):
            assert frame.frame_no == i, f"{run_id}: frames are not dense"
            if frame.kind == "run_claimed":
                data = json.loads(frame.data_json)
                epochs.append(data["epoch"])
                owners[(run_id, data["epoch"])] = data["owner_id"]
                takeovers += "took_over_from" in data
            elif frame.kind == "node_state" and frame.state == "finished":
                node_recorded.add((run_id, frame.node_id, frame.iteration, frame.attempt))
            elif frame.kind == "attempt_finished" and frame.state == "interrupted":
                j = i
                while frames[j].kind == "attempt_finished" and frames[j].state == "interrupted":
                    j -= 1
                assert frames[j].kind == "run_claimed", f"{run_id}: frame {frame.frame_no}"
                key = (run_id, frame.node_id, frame.iteration, frame.attempt)
                interrupted_by[key] = json.loads(frames[j].data_json)["epoch"]
        assert epochs and epochs == sorted(set(epochs)), f"{run_id}: claims {epochs}"

    # Each node finished, with exactly one finished attempt, and no two owners ever had
    # attempts of one node in progress at the same time.
    nodes = _rows(db, sa.select(n.c.run_id, n.c.node_id, n.c.iteration, n.c.state))
    assert len(nodes) == 3 * len(run_ids)
    assert {row.state for row in nodes} == {"finished"}
    attempts = _rows(db, sa.select(a).order_by(a.c.run_id, a.c.node_id, a.c.iteration, a.c.attempt))
    by_node: dict[tuple[str, str, int], list[Any]] = defaultdict(list)
    for row in attempts:
        by_node[(row.run_id, row.node_id, row.iteration)].append(row)
    assert set(by_node) == {(row.run_id, row.node_id, row.iteration) for row in nodes}
    for key, rows in by_node.items():
        states = [(x.attempt, x.state, x.owner_epoch) for x in rows]
        assert {row.state for row in rows} <= {"finished", "interrupted"}, f"{key}: {states}"
        for row in rows:
            if row.state == "interrupted":
                assert interrupted_by[(*key, row.attempt)] > row.owner_epoch, f"{key}: {states}"
        # An attempt's end and its node's end commit together: one finished attempt per node,
        # the one its node_state frame names, whenever the owner was killed.
        finished = [row for row in rows if row.state == "finished"]
        assert len(finished) == 1, f"{key}: {states}"
        assert (*key, finished[0].attempt) in node_recorded, f"{key}: {states}"
        # Each attempt ended (an interrupted one when the next owner claimed the run) before
        # the next one started; epochs only grow.
        for before, after in itertools.pairwise(rows):
            assert before.owner_epoch <= after.owner_epoch, f"{key}: {states}"
            assert before.finished_at_ms is not None, key
            assert before.finished_at_ms <= after.started_at_ms, (
                f"{key}: attempt {before.attempt} (epoch {before.owner_epoch}) ended at "
                f"{before.finished_at_ms}, after attempt {after.attempt} (epoch "
                f"{after.owner_epoch}) started at {after.started_at_ms}"
            )

    # Every checkpoint a worker acknowledged is in the database, under the same hash, and
    # every attempt was executed by one process only.
    stored = {
        (row.run_id, row.node_id, row.iteration, row.attempt, row.sequence): row.content_hash
        for row in _rows(  # a live ref's hash is on the checkpoint frame it points at
            db,
            sa.select(refs, f.c.content_hash).join(
                f, (f.c.run_id == refs.c.run_id) & (f.c.frame_no == refs.c.frame_no)
            ),
        )
    }
    acks, calls = {}, Counter()
    for lines in logs.values():
        for fields in lines:
            if fields[0] == "ack":
                run_id, node, iteration, attempt, sequence, digest = fields[1:]
                acks[(run_id, node, int(iteration), int(attempt), int(sequence))] = digest
            elif fields[0] == "call":
                calls[tuple(fields[1:])] += 1
    assert acks, "no worker acknowledged any checkpoint"
    lost = {key for key, digest in acks.items() if stored.get(key) != digest}
    assert not lost, (
        f"{len(lost)} acknowledged checkpoints are not in the database: {sorted(lost)[:5]}"
    )
    assert max(calls.values()) == 1, [key for key, count in calls.items() if count > 1][:5]
    report = db.verify()
    assert report.ok, report
    sample = random.Random(SEED).sample(sorted(acks), min(50, len(acks)))
    for key in sample:
        assert content_hash(db.store.read_content(acks[key])) == acks[key]
    return {
        "acks": acks,
        "takeovers": takeovers,
        "owners": owners,
        "calls": calls,
    }


def _proc_state(pid: int) -> str:
    """The kernel's one-letter state of a process (``T``: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]


def _schema_of(url: str) -> str:
    options = parse_qs(urlsplit(url).query)["options"][0]
    return options.split("search_path=", 1)[1].strip()


def _locks_held_in(db: st.Database, schema: str) -> int:
    """How many locks other sessions hold on tables of ``schema`` (any open transaction that
    touched them holds at least one until it ends)."""
    stmt = sa.text(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "JOIN pg_namespace ns ON ns.oid = c.relnamespace "
        "WHERE ns.nspname = :schema AND l.pid <> pg_backend_pid()"
    )
    return _rows(db, stmt.bindparams(schema=schema))[0][0]


# --- SQLite: several processes on one file ---------------------------------------------------


def test_two_worker_processes_share_one_sqlite_file(
    tmp_path: Path, fleet_factory: Callable[[str, float], Fleet]
) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    db = st.connect(url)
    try:
        wf = logged()
        run_ids = [db.submit(wf, {"topic": f"topic-{i}"}).id for i in range(20)]
        fleet = fleet_factory(url, 0.0)
        procs = [fleet.start(f"sqlite-{i}", "--concurrency", "2") for i in range(2)]
        _wait(lambda: _status_counts(db)["finished"] == 20, 240, "20 finished runs", procs)
        for proc in procs:
            assert fleet.stop(proc) == 0, proc.stderr()
            assert "ERROR" not in proc.stderr(), proc.stderr()

        figures = check_exactly_once(db, run_ids, fleet.log_lines())
        assert figures["takeovers"] == 0
        claims = Counter(figures["owners"].values())
        assert sum(claims.values()) == 20 and set(claims) <= {"sqlite-0", "sqlite-1"}
        workers = {w.worker_id: w for w in db.workers()}
        assert set(workers) == {"sqlite-0", "sqlite-1"}
        assert {w.state for w in workers.values()} == {"stopped"}
    finally:
        db.close()


# --- PostgreSQL: four processes, kill -9 -----------------------------------------------------

RUNS = int(os.environ.get("SMITHERS_TT_WORKERS_RUNS", "200"))
WORKERS = 4
CONCURRENCY = 4
STALE_AFTER = 3
VICTIMS = 2
KILLS_EACH = int(os.environ.get("SMITHERS_TT_WORKERS_KILLS_EACH", "1"))


@pytest.mark.postgres
@pytest.mark.slow
def test_four_worker_processes_killed_at_random_execute_every_run_exactly_once(
    pg_schema_url: str, fleet_factory: Callable[[str, float], Fleet]
) -> None:
    rng = random.Random(SEED)
    began = time.monotonic()
    db = st.connect(pg_schema_url)
    try:
        fleet = fleet_factory(pg_schema_url, 0.01)
        options = ("--concurrency", str(CONCURRENCY), "--stale-after", str(STALE_AFTER), "-q")
        slots = {i: fleet.start(f"w{i}", *options) for i in range(WORKERS)}
        wf = logged()
        run_ids = [db.submit(wf, {"topic": f"topic-{i}"}).id for i in range(RUNS)]

        # Kill the victims at seeded moments: once the fleet finished a seeded number of runs
        # and the victim holds runs, after a seeded extra delay. Restart each at once.
        victims = rng.sample(range(WORKERS), VICTIMS)
        order = victims * KILLS_EACH
        rng.shuffle(order)
        thresholds = sorted(rng.sample(range(RUNS // 20, RUNS * 3 // 4), len(order)))
        orphans: dict[str, set[str]] = {}
        for n, (threshold, slot) in enumerate(zip(thresholds, order, strict=True)):
            live = list(slots.values())
            _wait(
                lambda t=threshold: _status_counts(db)["finished"] >= t,
                240,
                f"{threshold} finished runs",
                live,
            )
            victim = slots[slot]

            def victim_holds_runs(v: Proc = victim) -> int:
                # The fleet may drain the queue before a late kill: give it more work, so
                # every kill lands on a worker that holds runs.
                if not _status_counts(db)["queued"]:
                    run_ids.extend(
                        db.submit(wf, {"topic": f"extra-{len(run_ids) + i}"}).id
                        for i in range(WORKERS * CONCURRENCY)
                    )
                return _owned_by(db, v.worker_id)

            _wait(victim_holds_runs, 60, "the victim's runs", live)
            time.sleep(rng.uniform(0.0, 0.4))
            victim.popen.send_signal(signal.SIGKILL)
            assert victim.popen.wait(30) == -signal.SIGKILL
            # A publish goes out whole with its COMMIT: the server may still be carrying out
            # what the worker sent before it died. Its runs are read once its sessions are gone.
            _wait(lambda v=victim: not _sessions_of(db, v.worker_id), 30, "the victim's sessions")
            r = S.runs
            orphans[victim.worker_id] = {
                row.run_id
                for row in _rows(
                    db,
                    sa.select(r.c.run_id).where(
                        r.c.status == "running", r.c.owner_id == victim.worker_id
                    ),
                )
            }
            time.sleep(rng.uniform(0.1, 1.0))
            slots[slot] = fleet.start(f"w{slot}-restart{n + 1}", *options)

        live = list(slots.values())
        _wait(
            lambda: _status_counts(db)["finished"] == len(run_ids),
            300,
            f"{len(run_ids)} finished runs",
            live,
        )
        for proc in live:
            assert fleet.stop(proc) == 0, proc.stderr()
            assert "ERROR" not in proc.stderr(), proc.stderr()[-3000:]

        figures = check_exactly_once(db, run_ids, fleet.log_lines())
        print(
            f"{len(run_ids)} runs, {len(order)} kills, {figures['takeovers']} takeovers, "
            f"{len(figures['acks'])} acknowledged checkpoints; {time.monotonic() - began:.1f} s"
        )
        # Every run a killed worker held was taken over by another worker, with a higher epoch.
        r, f = S.runs, S.frames
        claims = defaultdict(list)
        for row in _rows(db, sa.select(f).where(f.c.kind == "run_claimed").order_by(f.c.frame_no)):
            claims[row.run_id].append(json.loads(row.data_json))
        assert sum(len(ids) for ids in orphans.values()) >= len(order)
        for dead, held in orphans.items():
            for run_id in held:
                taken = [c for c in claims[run_id] if c.get("took_over_from") == dead]
                assert len(taken) == 1, (dead, run_id, claims[run_id])
                assert taken[0]["owner_id"] != dead
        assert figures["takeovers"] >= len(order)
        by_id = {w.worker_id: w for w in db.workers(stale_after=STALE_AFTER)}
        assert {by_id[p.worker_id].state for p in live} == {"stopped"}
        assert all(by_id[dead].runs == [] for dead in orphans)
        # Killed without a word: silent for longer than the takeover timeout.
        assert {by_id[dead].state for dead in orphans} == {"unresponsive"}
    finally:
        db.close()


# --- PostgreSQL: a paused worker is fenced out -----------------------------------------------


@pytest.mark.postgres
def test_a_worker_paused_past_the_stale_timeout_is_fenced_out_after_it_continues(
    pg_schema_url: str, fleet_factory: Callable[[str, float], Fleet]
) -> None:
    rng = random.Random(SEED)
    schema = _schema_of(pg_schema_url)
    db = st.connect(pg_schema_url)
    try:
        fleet = fleet_factory(pg_schema_url, 0.4)
        wf = logged()
        run_ids = [db.submit(wf, {"topic": topic}).id for topic in ("moth", "beetle")]
        paused = fleet.start("paused", "--concurrency", "2", "--stale-after", "2")

        def acked_both() -> bool:
            lines = fleet.log_lines().get(paused.pid, [])
            return {fields[1] for fields in lines if fields[0] == "ack"} >= set(run_ids)

        _wait(acked_both, 90, "a checkpoint of each run", [paused])
        # Pause it outside any transaction on our tables: a paused transaction would hold row
        # locks that keep everyone else from claiming its runs (that is not what this tests).
        for _ in range(100):
            paused.popen.send_signal(signal.SIGSTOP)
            _wait(lambda: _proc_state(paused.pid) == "T", 10, "the worker to stop")
            if not _locks_held_in(db, schema):
                break
            paused.popen.send_signal(signal.SIGCONT)
            time.sleep(rng.uniform(0.005, 0.05))
        else:
            pytest.fail("could not pause the worker outside a transaction in 100 tries")
        stopped_at = time.monotonic()
        before_pause = len(fleet.log_lines()[paused.pid])
        for run_id in run_ids:
            record = db.store.get_run(run_id)
            assert (record.status, record.owner_id, record.owner_epoch) == ("running", "paused", 1)

        taker = fleet.start("taker", "--concurrency", "2", "--stale-after", "2")
        _wait(
            lambda: _status_counts(db)["finished"] == len(run_ids),
            120,
            "the runs to finish",
            [taker],
        )
        assert time.monotonic() - stopped_at >= 2.0  # taken over only once stale
        paused.popen.send_signal(signal.SIGCONT)
        _wait(
            lambda: all(f"lost run {run_id}" in paused.stderr() for run_id in run_ids),
            60,
            "the paused worker to learn it lost both runs",
            [paused],
        )
        time.sleep(1.0)  # anything it still tries to write, it tries now
        assert fleet.stop(paused) == 0, paused.stderr()
        assert fleet.stop(taker) == 0, taker.stderr()

        logs = fleet.log_lines()
        check_exactly_once(db, run_ids, logs)
        for run_id in run_ids:
            frames = db.store.frames(run_id)
            claims = [(fr.frame_no, fr.data) for fr in frames if fr.kind == "run_claimed"]
            assert [data for _, data in claims] == [
                {"epoch": 1, "owner_id": "paused"},
                {"epoch": 2, "owner_id": "taker", "took_over_from": "paused"},
            ]
            taken_at = claims[1][0]
            (finished,) = [fr for fr in frames if fr.kind == "run_finished"]
            assert finished.frame_no > taken_at
            # The paused owner's attempts ended interrupted by the takeover; nothing it
            # published is later than the takeover.
            old = [x for x in db.store.list_attempts(run_id) if x.owner_epoch == 1]
            assert old and {x.state for x in old} == {"interrupted"}
            old_keys = {(x.key.node_id, x.key.iteration, x.key.attempt) for x in old}
            old_frames = [
                fr
                for fr in frames
                if fr.kind in ("checkpoint", "attempt_started", "node_state")
                and (fr.node_id, fr.iteration, fr.attempt) in old_keys
            ]
            assert old_frames and max(fr.frame_no for fr in old_frames) < taken_at
            # The taker resumed research from the newest checkpoint the paused owner stored.
            old_refs = [
                ref
                for ref in db.store.list_refs(run_id, node_id="research", limit=1000).items
                if (ref.node_id, ref.iteration, ref.attempt) in old_keys
            ]
            newest = max(old_refs, key=lambda ref: (ref.attempt, ref.sequence))
            resumed = next(
                x for x in db.store.list_attempts(run_id, "research") if x.owner_epoch == 2
            )
            assert resumed.resumed_from == (
                run_id,
                "research",
                0,
                newest.attempt,
                newest.sequence,
            )
            assert f"took run {run_id} over from paused" in taker.stderr()

        # After it continued, the paused worker neither started nor acknowledged anything new:
        # its late publishes failed with FenceLost, or it stopped its agents first.
        late = logs[paused.pid][before_pause:]
        print("after SIGCONT the paused worker logged", late, "and said:")
        print("\n".join(line for line in paused.stderr().splitlines() if "lost" in line))
        assert all(fields[0] in ("fence", "ack") for fields in late), late
        assert all(fields[1] in run_ids for fields in late)
        workers = {w.worker_id: w for w in db.workers()}
        assert workers["paused"].state == workers["taker"].state == "stopped"
        assert workers["paused"].runs == []
    finally:
        db.close()


# --- breakpoints changed while a worker process executes the run ---------------------------


def test_a_breakpoint_set_while_a_worker_process_runs_the_run_pauses_it_there(
    db_url: str, fleet_factory: Callable[[str, float], Fleet]
) -> None:
    db = st.connect(db_url)
    try:
        wf = logged()
        run = db.submit(wf, {"topic": "bees"})  # no breakpoint when it was submitted
        fleet = fleet_factory(db_url, 0.5)
        proc = fleet.start("bp-0")

        def started() -> bool:
            return any(f.kind == "attempt_started" for f in db.get_run(run.id).frames())

        _wait(started, 120, "the worker to start the run", [proc])
        assert db.get_run(run.id).status == "running"
        db.set_breakpoints(run.id, break_before=["review"])  # from this process, meanwhile
        _wait(lambda: db.get_run(run.id).status == "paused", 120, "the pause", [proc])
        paused = db.get_run(run.id)
        assert (paused.pause.reason, paused.pause.when) == ("breakpoint", "before")
        assert paused.pause.node_id == "review"
        states = {n.node_id: n.state for n in paused.nodes()}
        assert states["write"] == "finished" and states.get("review") != "finished"
        db.continue_run(run.id)  # queued again: the same worker claims it and finishes
        _wait(lambda: db.get_run(run.id).status == "finished", 120, "the end", [proc])
        assert fleet.stop(proc) == 0, proc.stderr()
        done = db.get_run(run.id)
        assert [f.node_id for f in done.frames() if f.kind == "run_paused"] == ["review"]
    finally:
        db.close()
