"""A missing extra says which ``pip install 'smithers-tt[extra]'`` fixes it, on a wheel install
without any extra (what ``pip install smithers-tt`` gives)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PG_URL
from tests.installed.conftest import Installed

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # a fresh venv, once per session


def one_line_error(result) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one line, never a traceback
    return lines[0]


def test_postgres_url_without_psycopg_is_one_line_naming_the_postgres_extra(
    core: Installed, tmp_path: Path
) -> None:
    result = core.run("smithers-tt", "--db", PG_URL, "runs", cwd=tmp_path)

    assert one_line_error(result) == (
        "error: PostgreSQL needs psycopg, which is not installed: "
        "pip install 'smithers-tt[postgres]'"
    )


def test_postgres_url_without_psycopg_gives_a_json_error_for_scripts(
    core: Installed, tmp_path: Path
) -> None:
    result = core.run("smithers-tt", "--json", "--db", PG_URL, "runs", cwd=tmp_path)

    error = json.loads(one_line_error(result))["error"]
    assert error["code"] == "extra_missing"
    assert error["details"] == {"module": "psycopg", "extra": "postgres"}


def test_lineage_without_duckdb_is_one_line_naming_the_lineage_extra(
    core: Installed, tmp_path: Path
) -> None:
    assert core.run("smithers-tt", "migrate", cwd=tmp_path).returncode == 0

    result = core.run("smithers-tt", "lineage", "SELECT 1", cwd=tmp_path)

    assert one_line_error(result) == (
        "error: lineage analytics needs duckdb, which is not installed: "
        "pip install 'smithers-tt[lineage]'"
    )


def test_lab_without_jupyterlab_is_one_line_naming_the_notebook_extra(
    core: Installed, tmp_path: Path
) -> None:
    result = core.run("smithers-tt", "lab", cwd=tmp_path)

    assert one_line_error(result) == (
        "error: smithers-tt lab needs jupyterlab, which is not installed: "
        "pip install 'smithers-tt[notebook]'"
    )
    assert not list(tmp_path.iterdir()), "nothing was copied or created"


DEBUG_A_RUN = """
import smithers_tt as st
from smithers_tt.demo import demo_workflow
db = st.connect("sqlite:///debug.db")
run = db.run(demo_workflow()[0], {"topic": "bee"})
try:
    db.debug(run.id)
except ImportError as error:  # ExtraMissing is an ImportError and a SmithersError
    print(type(error).__name__, isinstance(error, st.SmithersError), error, sep="|")
"""


def test_debug_without_the_notebook_extra_names_it_instead_of_a_bare_module_error(
    core: Installed, tmp_path: Path
) -> None:
    result = core.run("python", "-c", DEBUG_A_RUN, cwd=tmp_path)

    assert result.stdout.strip() == (
        "ExtraMissing|True|the notebook debugger needs ipywidgets, which is not installed: "
        "pip install 'smithers-tt[notebook]'"
    ), result.stderr


def _postgres_notebook_probe() -> str:
    """The first code cell of notebook 05: it decides whether the notebook can go on."""
    book = json.loads((ROOT / "notebooks" / "05_postgres.ipynb").read_text())
    return "".join(next(c for c in book["cells"] if c["cell_type"] == "code")["source"])


def test_postgres_notebook_says_psycopg_is_not_installed_rather_than_not_reachable(
    core: Installed, tmp_path: Path
) -> None:
    result = core.run(
        "python", "-c", _postgres_notebook_probe(), cwd=tmp_path, SMITHERS_TT_PG_URL=PG_URL
    )

    assert result.stdout.strip() == (
        "skipping: PostgreSQL needs psycopg, which is not installed: "
        "pip install 'smithers-tt[postgres]'"
    ), result.stderr


CHAT_WITHOUT_OPENAI = """
import smithers_tt as st
from smithers_tt.integrations.openai_agent import ChatAgent

wf = st.Workflow("chat")
agent = ChatAgent("any-model", base_url="http://127.0.0.1:9/v1")
wf.task("draft", agent=agent, prompt=lambda ctx: "hello", retries=0)
run = st.connect("sqlite:///chat.db").run(wf, {})
print(run.status, "|", run.error)
"""


def test_chat_agent_without_openai_fails_its_run_naming_the_openai_extra(
    core: Installed, tmp_path: Path
) -> None:
    result = core.run("python", "-c", CHAT_WITHOUT_OPENAI, cwd=tmp_path)

    assert result.stdout.startswith("failed |"), result.stdout + result.stderr
    assert (
        "ChatAgent needs openai, which is not installed: pip install 'smithers-tt[openai]'"
        in result.stdout
    )
