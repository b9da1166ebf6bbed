"""Records AgentChat 0.7.5 running each scenario in-process on the scripted
model: what Console prints, every item run_stream yields, the TaskResult, and
the team's component JSON (what RemoteTeam sends to agentd); for a scenario
with further runs, the same for each (team.run_stream called again on the
same team with the run's task). Writes tests/testdata/agentchat/<scenario>.json.

    AGENTD_ENV/python.sh autogen_check/record.py     # from clients/python

Only the recorder's scaffolding is here; the teams, agents, model client and
Console are AgentChat's own, unchanged.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import common
from scenarios import SCENARIOS, agentchat_task, answering, close_clients
from support import ScriptedModel


async def record_one(sc: "object") -> dict[str, Any]:
    from scenarios import Scenario

    assert isinstance(sc, Scenario)
    model = ScriptedModel(sc.script)
    try:
        if sc.answers is not None:
            team = sc.build(model.url, answering(sc.answers))
        else:
            team = sc.build(model.url)
        component = common.component(team, model.url)
        text, result, seen = await common.console(team.run_stream(task=sc.task))
        runs = []
        for task in sc.runs or []:
            run_text, run_result, run_seen = await common.console(team.run_stream(task=agentchat_task(task)))
            runs.append({"task": task, "console": run_text, "stream": run_seen,
                         "result": common.result_dict(run_result)})
        if model.script:
            raise RuntimeError(f"{sc.name}: {len(model.script)} scripted replies left unused")
        out: dict[str, Any] = {
            "answers": sc.answers or [],
            "task": sc.task,
            "script": sc.script,
            "component": component,
            "console": text,
            "stream": seen,
            "result": common.result_dict(result),
        }
        if runs:
            out["runs"] = runs
        return out
    finally:
        await close_clients()
        model.close()


def main() -> None:
    warnings.filterwarnings("ignore", message="Resolved model mismatch")
    os.makedirs(common.TESTDATA, exist_ok=True)
    for sc in SCENARIOS:
        out = common.run(record_one(sc))
        with open(os.path.join(common.TESTDATA, sc.name + ".json"), "w") as f:
            json.dump(out, f, indent=1, ensure_ascii=False, sort_keys=True)
            f.write("\n")
        for i, r in enumerate([out] + out.get("runs", []), 1):
            print(f"{sc.name} run {i}: {len(r['result']['messages'])} messages, stop: {r['result']['stop_reason']}")


if __name__ == "__main__":
    main()
