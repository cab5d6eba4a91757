"""Where a run's time went, from the timeline its workers wrote (``SMITHERS_TT_TEST_TIMELINE``).

    SMITHERS_TT_TEST_TIMELINE=/tmp/tl ./dev test
    python -m tests.timeline_report /tmp/tl [TOP]

Prints, per scheduling group (``xdist_group_of`` in tests/conftest.py: ``browser``,
``machine``, ``venv-*``; the nbval notebooks; everything else), the chain: the seconds its
tests took (set-up + call + tear-down) one after another on one worker, and the CPU seconds
they cost (the worker's own and the subprocesses it waited for); then each worker's busy
seconds and when it ended; then the TOP tests by CPU. On shared cores the wall time says how
busy the neighbours were, the CPU what a test costs: compare runs by CPU and by chains.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

NOTEBOOKS = "tests/test_notebooks.py::test_notebook_runs_with_its_checked_outputs"


def report(folder: Path, top: int = 25) -> str:
    seconds: dict[str, float] = defaultdict(float)
    cpu: dict[str, tuple[float, float]] = {}
    group: dict[str, str] = {}
    for path in folder.glob("xdist-groups.json.*"):  # the scheduler's files, if copied here
        group.update(json.loads(path.read_text()))
    worker: dict[str, str] = {}
    spans: dict[str, list[float]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        name = path.stem
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["when"] == "cpu":
                cpu[row["id"]] = (row["self"], row["children"])
                group[row["id"]] = row.get("group") or group.get(row["id"], "")
                continue
            seconds[row["id"]] += row["stop"] - row["start"]
            worker[row["id"]] = name
            span = spans.setdefault(name, [row["start"], row["stop"]])
            span[0], span[1] = min(span[0], row["start"]), max(span[1], row["stop"])
    if not seconds:
        return f"no timeline in {folder}"
    start = min(s for s, _ in spans.values())

    def kind(test: str) -> str:
        if group.get(test):
            return group[test]
        return "notebooks (nbval, each alone)" if test.startswith(NOTEBOOKS) else "ungrouped"

    chains: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for test, took in seconds.items():
        chain = chains[kind(test)]
        chain[0] += took
        chain[1] += sum(cpu.get(test, (0.0, 0.0)))
        chain[2] += 1
    lines = ["group: chain s (set-up + call + tear-down, summed), CPU s, tests"]
    for name, (took, used, count) in sorted(chains.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  {took:8.1f} s  {used:8.1f} CPU-s  {int(count):5d}  {name}")
    took, used = sum(seconds.values()), sum(a + b for a, b in cpu.values())
    lines.append(f"  {took:8.1f} s  {used:8.1f} CPU-s  {len(seconds):5d}  all")
    lines.append("worker: busy s, ended at s (from the run's first test)")
    busy: dict[str, float] = defaultdict(float)
    for test, took in seconds.items():
        busy[worker[test]] += took
    for name in sorted(spans):
        lines.append(f"  {name}: {busy[name]:8.1f}  {spans[name][1] - start:8.1f}")
    lines.append(f"the most CPU (worker + waited subprocesses), top {top}:")
    ranked = sorted(cpu.items(), key=lambda kv: -sum(kv[1]))[:top]
    for test, (own, children) in ranked:
        lines.append(f"  {own + children:7.1f} = {own:6.1f} + {children:6.1f}  {test}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 25))
