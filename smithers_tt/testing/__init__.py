"""Tools for tests, benchmarks and demos at scale: large runs written in bulk.

::

    from smithers_tt.testing import large_run

    run_id = large_run(db, 10_000)  # a finished run of exactly 10,000 frames
    db.debug(run_id)  # the notebook debugger on it

Nothing here is imported by ``import smithers_tt``.
"""

from smithers_tt.testing._synthetic import CODEC, NODES, large_run

__all__ = ["CODEC", "NODES", "large_run"]
