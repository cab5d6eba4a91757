"""The error tree and the package surface: what scripts and generic handlers rely on."""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest

import smithers_tt
from smithers_tt import errors

ALL_ERRORS = errors.all_errors()
BY_NAME = pytest.mark.parametrize("cls", ALL_ERRORS, ids=[c.__name__ for c in ALL_ERRORS])

# Extras, never imported by the core (DESIGN: "The core imports none of duckdb, pandas,
# ipywidgets or plotly; those are extras").
EXTRAS = ["duckdb", "pandas", "pyarrow", "ipywidgets", "plotly", "anywidget", "jupyterlab"]

# The public names of ``import smithers_tt``: changing them is an API change, made on purpose.
PUBLIC_NAMES = [
    "MAX_CHECKPOINT_BYTES",
    "AgentCheckpoint",
    "CheckpointCapability",
    "CheckpointCorrupt",
    "CheckpointFormat",
    "CheckpointInvalid",
    "CheckpointMissing",
    "CheckpointMode",
    "CheckpointPoisoned",
    "CheckpointTooLarge",
    "Database",
    "FenceLost",
    "ForkIncompatible",
    "GenerateRequest",
    "GenerateResult",
    "Loop",
    "ModelCall",
    "OutputInvalid",
    "PriceTable",
    "Promotion",
    "Retry",
    "Run",
    "RunNotFound",
    "SmithersError",
    "Snapshot",
    "SnapshotDiff",
    "Sweep",
    "TaskContext",
    "TaskFailed",
    "Workflow",
    "WorkflowChanged",
    "__version__",
    "connect",
    "diff",
    "require_extras",
]


def test_error_tree_lists_the_root_first_and_every_class_once():
    assert ALL_ERRORS[0] is errors.SmithersError
    assert len(set(ALL_ERRORS)) == len(ALL_ERRORS)
    defined = {
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, errors.SmithersError)
    }
    assert set(ALL_ERRORS) == defined


def _drawn_tree() -> dict[str, str]:
    """``{class: parent}`` as the module docstring draws the tree (by indentation)."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        marker = line.find("── ")
        if line.strip() == "SmithersError":
            stack = [(-1, "SmithersError")]
            continue
        if marker < 0 or not stack:
            continue
        name = line[marker + 3 :].split()[0]
        while stack and stack[-1][0] >= marker:
            stack.pop()
        parents[name] = stack[-1][1]
        stack.append((marker, name))
    return parents


def test_error_tree_drawn_in_the_docstring_is_the_class_tree():
    drawn = _drawn_tree()
    actual = {cls.__name__: cls.__bases__[0].__name__ for cls in ALL_ERRORS[1:]}
    assert drawn == actual


def test_a_damaged_row_is_a_store_error():
    assert issubclass(errors.StoreCorrupt, errors.StoreError)
    assert errors.StoreCorrupt.code == "store_corrupt"
    assert not errors.StoreCorrupt.retryable


def test_error_codes_are_unique_and_non_empty():
    codes = [cls.__dict__.get("code") for cls in ALL_ERRORS]
    assert all(isinstance(code, str) and code for code in codes)
    assert len(set(codes)) == len(codes)


@BY_NAME
def test_error_derives_from_smithers_error_with_a_docstring(cls):
    assert issubclass(cls, errors.SmithersError)
    assert (cls.__dict__.get("__doc__") or "").strip()
    assert isinstance(cls.retryable, bool)


@BY_NAME
def test_error_is_value_error_exactly_when_invalid_input(cls):
    assert issubclass(cls, ValueError) == issubclass(cls, errors.InvalidInput)


@BY_NAME
def test_error_is_lookup_error_exactly_when_not_found(cls):
    assert issubclass(cls, LookupError) == issubclass(cls, errors.NotFound)


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (errors.CheckpointInvalid, ValueError),
        (errors.CheckpointTooLarge, ValueError),
        (errors.FormatNotDeclared, ValueError),
        (errors.InvalidArgument, ValueError),
        (errors.RunNotFound, LookupError),
        (errors.AttemptNotFound, LookupError),
        (errors.FrameNotFound, LookupError),
        (errors.CheckpointMissing, LookupError),
    ],
    ids=lambda v: v.__name__,
)
def test_error_is_caught_by_the_generic_builtin_handler(cls, builtin):
    with pytest.raises(builtin):
        raise cls("boom")


def _example(cls: type[errors.SmithersError]) -> errors.SmithersError:
    return cls(
        f"{cls.__name__}: something went wrong at $.payload.x",
        path="$.payload.x",
        size=17,
        limit=16,
        run_id="run-1",
        items=[1, "two", None],
    )


@BY_NAME
@pytest.mark.parametrize("protocol", [0, pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL])
def test_error_pickle_round_trip_keeps_type_message_and_details(cls, protocol):
    original = _example(cls)
    copy = pickle.loads(pickle.dumps(original, protocol=protocol))
    assert type(copy) is cls
    assert copy.message == original.message
    assert copy.details == original.details
    assert str(copy) == str(original)
    assert copy.args == original.args
    assert copy.to_dict() == original.to_dict()


@BY_NAME
def test_error_to_dict_is_json_serialisable(cls):
    err = cls("not good", path="$.a", when=object(), pair=("a", 1), nested={"k": [1.5]})
    described = err.to_dict()
    assert json.loads(json.dumps(described, allow_nan=False)) == described
    assert described["code"] == cls.code
    assert described["message"] == "not good"
    assert described["retryable"] is cls.retryable
    assert described["details"]["path"] == "$.a"
    assert described["details"]["pair"] == ["a", 1]


def test_checkpoint_invalid_exposes_its_json_path():
    assert errors.CheckpointInvalid("bad", path="$.payload.a[0]").path == "$.payload.a[0]"
    assert errors.CheckpointInvalid("bad").path is None


def test_package_import_loads_no_optional_extra():
    script = (
        "import json, sys\n"
        "import smithers_tt\n"
        f"print(json.dumps(sorted(m for m in {EXTRAS!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_package_public_names_are_pinned_and_exported():
    assert smithers_tt.__all__ == PUBLIC_NAMES
    exported = {
        name
        for name, value in vars(smithers_tt).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert exported | {"__version__"} == set(PUBLIC_NAMES)
    # sorted the way ruff keeps ``__all__`` (RUF022): constants, classes, then the rest
    ruff_order = sorted(
        PUBLIC_NAMES, key=lambda n: (0 if n.isupper() else 1 if n[:1].isupper() else 2, n)
    )
    assert ruff_order == PUBLIC_NAMES


def _attribute_docstrings() -> dict[str, str]:
    """Module-level ``NAME = ...`` followed by a string, in every module of the package."""
    found: dict[str, str] = {}
    for file in Path(smithers_tt.__file__).parent.rglob("*.py"):
        body = ast.parse(file.read_text(encoding="utf-8")).body
        for node, after in itertools.pairwise(body):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            doc = (
                after.value.value
                if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                else None
            )
            for target in targets:
                if isinstance(target, ast.Name) and isinstance(doc, str) and doc.strip():
                    found[target.id] = doc
    return found


@pytest.mark.parametrize("name", [n for n in PUBLIC_NAMES if not n.startswith("__")])
def test_package_public_name_has_a_docstring(name):
    value = getattr(smithers_tt, name)
    if inspect.isclass(value):
        doc = value.__dict__.get("__doc__")
    elif inspect.isroutine(value):
        doc = value.__doc__
    else:  # a constant or type alias: its docstring is the string after its assignment
        doc = _attribute_docstrings().get(name)
    assert doc and doc.strip(), f"smithers_tt.{name} has no docstring"


def test_outcome_unknown_is_a_store_error_that_must_not_be_retried_blindly():
    # A caller that retries every retryable error must not repeat a write that may have
    # committed; generic store-error handlers still catch it.
    assert issubclass(errors.OutcomeUnknown, errors.StoreError)
    assert not issubclass(errors.OutcomeUnknown, errors.TransientStoreError)
    assert errors.OutcomeUnknown.retryable is False
    assert errors.OutcomeUnknown.code == "outcome_unknown"
