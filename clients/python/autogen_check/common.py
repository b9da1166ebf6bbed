"""What record.py and check.py share: paths, and the forms in which a run is
recorded and compared."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
TESTDATA = os.path.join(ROOT, "tests", "testdata", "agentchat")


def plain(msg: Any) -> dict[str, Any]:
    """A message or event as its JSON dump, less what is made anew for
    every object or request (id, created_at, an input request's
    request_id)."""
    d: dict[str, Any] = msg.model_dump(mode="json")
    for key in ("id", "created_at", "request_id"):
        d.pop(key, None)
    return d


async def console(stream: Any) -> tuple[str, Any, list[dict[str, Any]]]:
    """Runs AgentChat's Console on a run_stream, capturing what it prints;
    returns the text, the TaskResult and everything the stream yielded."""
    from autogen_agentchat.base import TaskResult
    from autogen_agentchat.ui import Console

    seen: list[dict[str, Any]] = []

    async def tee() -> Any:
        async for item in stream:
            if not isinstance(item, TaskResult):
                seen.append(plain(item))
            yield item

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = await Console(tee())
    return out.getvalue(), result, seen


#: What the scripted model server's address is recorded as (it changes with
#: every run; agentd ignores a team file's base_url for its own endpoint).
MODEL_URL = "http://scripted-model.invalid/v1"


def component(team: Any, model_url: str) -> dict[str, Any]:
    """The team's component JSON with the model server's address replaced."""
    text = json.dumps(team.dump_component().model_dump(mode="json"))
    out: dict[str, Any] = json.loads(text.replace(json.dumps(model_url)[1:-1], MODEL_URL))
    return out


def result_dict(result: Any) -> dict[str, Any]:
    return {"messages": [plain(m) for m in result.messages], "stop_reason": result.stop_reason}


def load(name: str) -> dict[str, Any]:
    with open(os.path.join(TESTDATA, name + ".json")) as f:
        data: dict[str, Any] = json.load(f)
    return data


def run(coro: Any) -> Any:
    return asyncio.run(coro)
