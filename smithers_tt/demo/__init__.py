"""The deterministic demo: agents and the workflow the README, notebooks and tests use."""

from smithers_tt.demo.agents import (
    DEMO_PRICES,
    Draft,
    Notes,
    Researcher,
    Review,
    Reviewer,
    Writer,
)
from smithers_tt.demo.workflow import DemoAgents, demo_workflow

__all__ = [
    "DEMO_PRICES",
    "DemoAgents",
    "Draft",
    "Notes",
    "Researcher",
    "Review",
    "Reviewer",
    "Writer",
    "demo_workflow",
]
