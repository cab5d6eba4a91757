"""``st.require_extras``: a notebook or script checks its extras before it starts (the wheel
side, where an extra is really missing, is tests/installed/test_notebook_extras.py)."""

from __future__ import annotations

import pytest

import smithers_tt as st
from smithers_tt.errors import ExtraMissing, InvalidArgument


def test_require_extras_passes_when_every_module_of_the_extras_is_installed() -> None:
    st.require_extras("lineage", "notebook", "langgraph", "openai", "postgres")


def test_require_extras_refuses_an_extra_that_does_not_exist_and_lists_the_real_ones() -> None:
    with pytest.raises(InvalidArgument, match="no extra named lineage2") as refused:
        st.require_extras("lineage2")
    assert "langgraph, lineage, notebook, openai, postgres" in str(refused.value)


def test_extra_missing_shows_as_one_line_in_ipython() -> None:
    error = ExtraMissing("x needs y: pip install 'smithers-tt[lineage]'", extra="lineage")

    assert error._render_traceback_() == [
        "ExtraMissing: x needs y: pip install 'smithers-tt[lineage]'"
    ]
