"""Child process of the kill test: ``python _chat_child.py run|resume DB_URL BASE_URL RUN_ID``.

``run`` starts the five-turn chat workflow under ``RUN_ID``; ``resume`` continues it and
prints the run's output as JSON. Both define the workflow identically (same signature).
"""

from __future__ import annotations

import json
import sys

import smithers_tt as st
from smithers_tt.integrations.openai_agent import ChatAgent


def workflow(base_url: str) -> st.Workflow:
    agent = ChatAgent(
        "fake-model",
        base_url=base_url,
        system="You answer briefly.",
        followups=["second question", "third question", "fourth question", "fifth question"],
        max_retries=0,
    )
    wf = st.Workflow("chat-kill")
    wf.task("talk", agent=agent, prompt="first question")
    return wf


def main(argv: list[str]) -> int:
    mode, url, base_url, run_id = argv
    with st.connect(url) as db:
        wf = workflow(base_url)
        if mode == "run":
            run = db.run(wf, {"topic": "kill"}, run_id=run_id)
        else:
            run = db.resume(run_id, wf)
        print(json.dumps({"status": run.status, "output": run.output}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
