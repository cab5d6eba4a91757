"""An SQLite write that fails because of the disk says so (disk full, I/O error) and what to do;
it is not retried as if the database were busy, and nothing of it is written.

The failures are real: a small tmpfs filled up (in a mount namespace of the test's own), and a
file size limit (``RLIMIT_FSIZE``) that makes the writes of a large transaction fail with an I/O
error before its COMMIT (SQLite writes a transaction larger than its page cache to the WAL as
it goes).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import smithers_tt as st

from ._support import refs_of

# The child publishes a small checkpoint, then (once the disk is made to fail) one of
# sys.argv[2] characters: 3 MB is larger than SQLite's page cache (2 MB), so its pages are
# written to the WAL before the COMMIT; 200 KB fits, so they are written by the COMMIT.
_PRELUDE = """
import json, os, resource, signal, sys
import smithers_tt as st
path = sys.argv[1]
db = st.connect(f"sqlite:///{path}")
store = db.store
_, fence = store.create_run("wf", run_id="r1")
key = store.start_attempt(fence, "node").key
store.publish(fence, key, st.AgentCheckpoint("test", 1, {"n": "small"}))
big = st.AgentCheckpoint("test", 1, {"n": "x" * int(sys.argv[2])})

def publish():
    try:
        store.publish(fence, key, big)
        return {"error": None}
    except st.SmithersError as error:
        return {"error": type(error).__name__, "message": error.message}
"""

# From here on no file may grow by more than 16 KiB, as on a failing or full disk.
_FILE_SIZE_LIMIT = (
    _PRELUDE
    + """
sizes = [os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (max(sizes) + 16384, resource.RLIM_INFINITY))
print(json.dumps([publish()]))
"""
)

_FULL_DISK = (
    _PRELUDE
    + """
filler = os.path.join(os.path.dirname(path), "filler")
with open(filler, "wb") as out:  # leave about 256 KiB free
    free = os.statvfs(filler).f_bavail * os.statvfs(filler).f_frsize
    out.write(b"\\0" * max(0, free - 262_144))
first = publish()
os.remove(filler)  # doing what the message says: free space, then repeat the call
print(json.dumps([first, publish()]))
"""
)

_MOUNT_TMPFS = 'mount -t tmpfs -o size=8m tmpfs "$1" && shift && exec "$@"'


@functools.cache
def _tmpfs_refused() -> str | None:
    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(
            ["unshare", "-m", "sh", "-c", _MOUNT_TMPFS, "sh", folder, "true"],
            capture_output=True,
            text=True,
        )
    if probe.returncode != 0:
        return f"cannot mount a small tmpfs here: {probe.stderr.strip() or 'refused'}"
    return None


def _outcomes(args: list[str]) -> list[dict]:
    child = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


def _check_nothing_was_written(path: Path) -> None:
    with st.connect(f"sqlite:///{path}") as db:
        assert db.verify().ok
        assert [r.sequence for r in refs_of(db, "r1")] == [0]


def test_sqlite_write_on_a_full_disk_says_disk_full_and_succeeds_once_space_is_freed(
    tmp_path: Path,
) -> None:
    reason = _tmpfs_refused()
    if reason:
        pytest.skip(reason)
    folder = tmp_path / "small"
    folder.mkdir()
    path = folder / "full.db"
    mounted = ["unshare", "-m", "sh", "-c", _MOUNT_TMPFS, "sh", str(folder)]
    full, freed = _outcomes([*mounted, sys.executable, "-c", _FULL_DISK, str(path), "3000000"])
    assert full["error"] == "DiskError", full
    assert "disk full" in full["message"] and "free space" in full["message"]
    assert "nothing was written" in full["message"]
    assert freed == {"error": None}


def test_sqlite_io_error_before_commit_is_reported_as_such_not_retried_as_busy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "limited.db"
    (failed,) = _outcomes([sys.executable, "-c", _FILE_SIZE_LIMIT, str(path), "3000000"])
    assert failed["error"] == "DiskError", failed
    assert "I/O error" in failed["message"] and "nothing was written" in failed["message"]
    assert "busy timeout" not in failed["message"]
    _check_nothing_was_written(path)


def test_sqlite_disk_error_at_commit_raises_outcome_unknown_instead_of_retrying(tmp_path) -> None:
    # A disk that fails while SQLite writes a COMMIT may leave the transaction in the WAL, to
    # reappear at the next recovery: the store must not call it transient and run it again.
    path = tmp_path / "disk.db"
    (out,) = _outcomes([sys.executable, "-c", _FILE_SIZE_LIMIT, str(path), "200000"])
    assert out["error"] == "OutcomeUnknown", out
    assert "may or may not be stored" in out["message"]
    with st.connect(f"sqlite:///{path}") as db:
        assert db.verify().corrupt == []
        assert db.store.get_run("r1").status == "running"
