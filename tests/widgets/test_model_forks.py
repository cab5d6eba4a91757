"""What the debugger shows of a fork. When its parent was rewound past the fork point, the
fork tree and the run's header say where the parent now ends, only while it ends before that
frame; once the parent runs on past it again, the tree says the frame was rewound away. The
checkpoints a fork inherits by reference are listed with their stored sizes."""

from __future__ import annotations

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger, DebuggerModel


def _finished_run(db: st.Database) -> str:
    wf, _ = demo_workflow()
    return db.run(wf, {"topic": "bee"}).id


def _button(dbg: Debugger, run_id: str) -> str:
    return dbg.fork_tree.buttons[run_id].description


def test_the_fork_tree_and_header_say_where_the_parent_now_ends(db: st.Database) -> None:
    wf, _ = demo_workflow()
    parent = db.run(wf, {"topic": "bee"}).id
    at = 6
    child = db.fork(parent, at).id
    dbg = Debugger(db, child, live=False)
    assert dbg.model.fork_gap(child) is None
    assert dbg.model.fork_gap(parent) is None  # the root has no fork point
    assert dbg.model.fork_gap("no-such-run") is None
    assert _button(dbg, child).endswith(f"fork @ frame {at}")
    assert "rewound" not in dbg.header.value

    db.rewind(parent, at, confirm=True, force=True)  # the fork frame itself stays
    dbg.model.refresh()
    dbg.fork_tree.update()
    assert dbg.model.fork_gap(child) is None
    assert _button(dbg, child).endswith(f"fork @ frame {at}")

    db.rewind(parent, at - 2, confirm=True, force=True)  # now it ends before the fork point
    dbg.model.switch_run(parent)
    dbg.model.switch_run(child)
    assert dbg.model.fork_gap(child) == (at, at - 2)
    assert _button(dbg, child).endswith(f"fork @ frame {at} (parent now ends at frame {at - 2})")
    assert (
        f"(the parent now ends at frame {at - 2}: it was rewound past this fork's frame {at})"
        in dbg.header.value
    )

    db.resume(parent, wf)  # the parent runs on past the fork point: another history there
    dbg.model.switch_run(parent)
    dbg.model.switch_run(child)
    assert db.get_run(parent).record.clock > at
    assert dbg.model.fork_gap(child) is None
    assert _button(dbg, child).endswith(f"fork @ frame {at} (that frame was rewound away)")
    assert "rewound past" not in dbg.header.value


def test_sizes_of_checkpoints_a_fork_inherits_are_read_from_the_store(db: st.Database) -> None:
    parent = _finished_run(db)
    child = db.fork(parent, 8).id  # by reference: the parent's frames are not the child's
    model = DebuggerModel(db, child)
    inherited = list(model.snapshot_at(0).refs.values())
    assert inherited
    expected = {r.content_hash: db.store.load(r).encode().size for r in inherited}
    assert model.sizes(inherited) == expected
    again = DebuggerModel(db, child)  # its payloads shown first, then its sizes asked
    for ref in inherited:
        again.load(ref)
    assert again.sizes(inherited) == expected
    assert model.sizes(inherited[:1]) == {
        inherited[0].content_hash: expected[inherited[0].content_hash]
    }
