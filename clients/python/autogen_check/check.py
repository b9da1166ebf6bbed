"""Runs each scenario's team on agentd through RemoteTeam, under AgentChat
0.7.5, and compares with what AgentChat did in-process (record.py's
recordings): Console's text byte for byte, every item run_stream yields, and
run()'s TaskResult (messages and stop reason), for the first run and each
further run on the same team, which continues the same chat until reset().
Also: a cancelled CancellationToken cancels the chat and raises
CancelledError.

    AGENTD_ENV/python.sh autogen_check/check.py AGENTD_BINARY   # from clients/python
"""

from __future__ import annotations

import asyncio
import difflib
import json
import sys
import threading
import warnings
from typing import Any

import common
import agentd
from agentd.autogen import RemoteTeam, _message, content_types
from autogen_agentchat.messages import StructuredMessage
from autogen_core import CancellationToken
from scenarios import SCENARIOS, Scenario, agentchat_task, answering, close_clients
from support import Agentd, ScriptedModel

failures: list[str] = []


def same(what: str, got: Any, want: Any) -> None:
    if got == want:
        print(f"  ok: {what}")
        return
    g = got if isinstance(got, str) else json.dumps(got, indent=1, sort_keys=True)
    w = want if isinstance(want, str) else json.dumps(want, indent=1, sort_keys=True)
    diff = "".join(difflib.unified_diff(w.splitlines(True), g.splitlines(True), "AgentChat", "RemoteTeam"))
    failures.append(f"{what}:\n{diff}")
    print(f"  DIFFERS: {what}\n{diff}")


async def check_one(binary: str, sc: Scenario) -> None:
    rec = common.load(sc.name)
    model = ScriptedModel(sc.script)
    server = Agentd(binary, {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "scripted"})
    try:
        team = sc.build(model.url)
        same("component", common.component(team, model.url), rec["component"])

        # The human's answers come from RemoteTeam's input_func: the team's
        # own input_func is not part of its component.
        answers = answering(sc.answers) if sc.answers is not None else None
        remote = RemoteTeam(team, agentd.Client(server.url), name=sc.name, input_func=answers)
        text, result, seen = await common.console(remote.run_stream(task=sc.task))
        compare("", text, result, seen, rec)
        check_structured(team, result, rec)
        first_chat = remote.chat_id
        further = rec.get("runs", [])
        same("further runs recorded", [r["task"] for r in further], sc.runs or [])
        for i, want in enumerate(further, 2):
            # team.run_stream again: the same chat goes on with the run's task.
            text, result, seen = await common.console(remote.run_stream(task=agentchat_task(want["task"])))
            compare(f"run {i}: ", text, result, seen, want)
            same(f"run {i}: the chat it continues", remote.chat_id, first_chat)

        # run() after reset(): a new chat, and the same TaskResult for each run.
        await remote.reset()
        model.script = list(sc.script)
        again = await remote.run(task=sc.task)
        same("TaskResult of run()", common.result_dict(again), rec["result"])
        same("reset() started a new chat", remote.chat_id not in (None, first_chat), True)
        for i, want in enumerate(further, 2):
            again = await remote.run(task=agentchat_task(want["task"]))
            same(f"run {i}: TaskResult of run()", common.result_dict(again), want["result"])
    finally:
        await close_clients()
        server.stop()
        model.close()


async def check_cancel(binary: str) -> None:
    """Cancelling the token cancels the chat on agentd and raises
    CancelledError, as AgentChat's run_stream does."""
    sc = SCENARIOS[0]
    hold = threading.Event()
    model = ScriptedModel(sc.script, hold=hold)
    server = Agentd(binary, {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "scripted"})
    try:
        remote = RemoteTeam(sc.build(model.url), agentd.Client(server.url))
        token = CancellationToken()
        seen = []
        try:
            async for item in remote.run_stream(task=sc.task, cancellation_token=token):
                seen.append(type(item).__name__)
                token.cancel()
            failures.append("cancel: the run ended without CancelledError")
        except asyncio.CancelledError:
            pass
        hold.set()
        assert remote.chat_id is not None
        with agentd.Client(server.url) as c:
            chat = c.get(remote.chat_id)
            for _ in range(100):
                if chat["status"] == "cancelled":
                    break
                await asyncio.sleep(0.05)
                chat = c.get(remote.chat_id)
        same("cancel: what was yielded", seen, ["TextMessage"])
        same("cancel: the chat's status", chat["status"], "cancelled")
    finally:
        hold.set()
        await close_clients()
        server.stop()
        model.close()


def check_structured(team: Any, result: Any, rec: dict[str, Any]) -> None:
    """A StructuredMessage's content is an instance of its agent's own
    output_content_type; from the component JSON alone (no team object),
    of the model AgentChat's StructuredMessageFactory makes from its JSON
    Schema, with the same dump and text as AgentChat's message."""
    got = [m for m in result.messages if isinstance(m, StructuredMessage)]
    if not got:
        return
    own = {a.name: a._output_content_type for a in team._participants}
    same("structured content is the agent's class", [type(m.content) is own[m.source] for m in got],
         [True] * len(got))
    # The team's own component JSON: the recording's is written with sorted
    # keys, which loses the order of the schema's properties.
    types = content_types(None, team.dump_component().model_dump(mode="json"))
    want = [d for d in rec["result"]["messages"] if d["type"].startswith("StructuredMessage")]
    made = [_message(dict(d), types) for d in want]
    same("structured messages from the component alone", [common.plain(m) for m in made], want)
    same("their text from the component alone", [m.to_text() for m in made], [m.to_text() for m in got])


def compare(what: str, text: str, result: Any, seen: list[dict[str, Any]], want: dict[str, Any]) -> None:
    """One run_stream under Console against AgentChat's recording of it."""
    same(what + "Console output", text, want["console"])
    same(what + "run_stream items", merge_chunks(seen), merge_chunks(want["stream"]))
    streamed = sum(1 for it in want["stream"] if it["type"] == "ModelClientStreamingChunkEvent")
    replies = sum(1 for it in merge_chunks(want["stream"]) if it["type"] == "ModelClientStreamingChunkEvent")
    chunks = sum(1 for it in seen if it["type"] == "ModelClientStreamingChunkEvent")
    if streamed:
        # More chunks than streamed replies: the deltas came from agentd's
        # stream, not only from the messages.
        same(what + "chunk events came from deltas", chunks > replies, True)
    same(what + "TaskResult of run_stream", common.result_dict(result), want["result"])


def merge_chunks(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive chunk events of one source as one: how a reply is cut into
    chunks is the model server's business (and Console prints them joined)."""
    out: list[dict[str, Any]] = []
    for it in items:
        prev = out[-1] if out else None
        if (prev is not None and it["type"] == prev["type"] == "ModelClientStreamingChunkEvent"
                and it["source"] == prev["source"]):
            prev["content"] += it["content"]
            continue
        out.append({k: v for k, v in it.items() if k != "full_message_id"})
    return out


def main() -> None:
    warnings.filterwarnings("ignore", message="Resolved model mismatch")
    binary = sys.argv[1]
    for sc in SCENARIOS:
        print(sc.name)
        common.run(check_one(binary, sc))
    print("cancel")
    common.run(check_cancel(binary))
    if failures:
        print(f"\n{len(failures)} comparison(s) differ", file=sys.stderr)
        sys.exit(1)
    print("\nRemoteTeam matches AgentChat on every scenario")


if __name__ == "__main__":
    main()
