"""Run benchmarks: ``python -m benchmarks`` (all) or ``python -m benchmarks contract store``."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(
        m.name[6:] for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    chosen = argv or names
    unknown = [n for n in chosen if n not in names]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {names}", file=sys.stderr)
        return 2
    for name in chosen:
        print(f"\n=== {name} ===", flush=True)
        importlib.import_module(f"benchmarks.bench_{name}").main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
