"""RemoteTeam's runs and its translation of agentd's events into AgentChat
messages, in CI where AgentChat is not installed: each AgentChat team
recorded in-process (tests/testdata/agentchat, made by
autogen_check/record.py under AgentChat 0.7.5) runs on agentd on the same
scripted model through RemoteTeam's own run loop (agentd._remote.TeamRuns:
the first run creates the chat, each further run continues it), and what it
makes of each run's events must equal what AgentChat's run_stream yielded
for that run (JSON dumps, less id and created_at) and its TaskResult. The
AgentChat objects themselves, Console and run() are compared by
autogen_check/check.py, which needs AgentChat (make test-autogen-client)."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any, Mapping

import pytest

import agentd
from agentd._agentchat import StructuredType, Translator, structured_types
from agentd._remote import TeamRuns
from support import Agentd, ScriptedModel

RECORDINGS = sorted((pathlib.Path(__file__).parent / "testdata" / "agentchat").glob("*.json"))


def merge_chunks(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive chunk events of one source as one (how a reply is cut into
    chunks is the model server's business), without full_message_id."""
    out: list[dict[str, Any]] = []
    for it in items:
        prev = out[-1] if out else None
        if (prev is not None and it["type"] == prev["type"] == "ModelClientStreamingChunkEvent"
                and it["source"] == prev["source"]):
            prev["content"] += it["content"]
            continue
        out.append({k: v for k, v in it.items() if k != "full_message_id"})
    return out


def test_recordings_cover_the_teams_and_their_runs() -> None:
    names = {p.stem for p in RECORDINGS}
    assert names == {"round_robin", "swarm", "selector", "human", "runs_round_robin", "runs_swarm", "structured"}
    recs = {p.stem: json.loads(p.read_text()) for p in RECORDINGS}
    providers = {r["component"]["provider"] for r in recs.values()}
    assert providers == {"autogen_agentchat.teams.RoundRobinGroupChat", "autogen_agentchat.teams.Swarm",
                         "autogen_agentchat.teams.SelectorGroupChat"}
    # Three runs each: the round robin stopped by MaxMessageTermination every
    # time, the Swarm handed to the user and back.
    assert [r["result"]["stop_reason"] for r in runs_of(recs["runs_round_robin"])] == [
        "Maximum number of messages 3 reached, current message count: 3"] * 3
    assert [r["result"]["stop_reason"] for r in runs_of(recs["runs_swarm"])] == [
        "Handoff to user from triage detected.", "Handoff to user from billing detected.",
        "Text 'TERMINATE' mentioned"]
    assert [r["task"]["type"] for r in recs["runs_swarm"]["runs"]] == ["HandoffMessage"] * 2
    # Structured output: AgentChat's classes are named after the agents'
    # content types, whose objects are the messages' content.
    assert [(m["type"], m["format_string"]) for m in recs["structured"]["stream"] if "format_string" in m] == [
        ("StructuredMessage[Plan]", "{title} (priority {priority}): {steps}"), ("StructuredMessage[Verdict]", None)]


def runs_of(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every run of a recording: the first (its top-level fields), then the
    further ones."""
    first = {k: rec[k] for k in ("task", "console", "stream", "result")}
    return [first] + list(rec.get("runs", []))


async def run_on_agentd(url: str, rec: dict[str, Any]) -> tuple[list[list[dict[str, Any]]], list[Any], set[str]]:
    """Each run of the recording through TeamRuns: the translated items and
    how the run ended, and the chats the runs used."""
    answers = iter(rec.get("answers", []))
    items: list[list[dict[str, Any]]] = []
    ends: list[Any] = []
    chats: set[str] = set()
    async with agentd.AsyncClient(url, reconnect_delay=0.05) as c:
        runs = TeamRuns(rec["component"])

        async def answer(pending: Mapping[str, Any]) -> None:
            assert runs.chat_id is not None and pending["kind"] == "message"
            await c.send_input(runs.chat_id, str(pending["request_id"]), content=next(answers))

        for r in runs_of(rec):
            items.append([d async for d in runs.run(c, r["task"], answer=answer)])
            ends.append(runs.end)
            assert runs.chat_id is not None
            chats.add(runs.chat_id)
    return items, ends, chats


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_team_runs_as_agentchat_ran_it(agentd_bin: str, path: pathlib.Path) -> None:
    rec = json.loads(path.read_text())
    model = ScriptedModel(rec["script"])
    server = Agentd(agentd_bin, {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "scripted"})
    try:
        got, ends, chats = asyncio.run(run_on_agentd(server.url, rec))
        assert len(chats) == 1  # every run continued the chat of the first
        for n, (items, end, want) in enumerate(zip(got, ends, runs_of(rec), strict=True), 1):
            for it in items:
                # Made anew for every request, by agentd and AgentChat alike.
                assert it.pop("request_id", "x")
            assert end is not None and end.status == "completed", n
            assert merge_chunks(items) == merge_chunks(want["stream"]), n
            messages = [m for m in items if m["type"] != "ModelClientStreamingChunkEvent"]
            assert {"messages": messages, "stop_reason": end.stop_reason} == want["result"], n
            streamed = sum(1 for m in merge_chunks(want["stream"]) if m["type"] == "ModelClientStreamingChunkEvent")
            if streamed:
                # The streaming agent's deltas reached the stream (its replies
                # come after a pause, see autogen_check/scenarios.py): more
                # chunks than the messages alone would make up.
                assert sum(1 for m in items if m["type"] == "ModelClientStreamingChunkEvent") > streamed, n
        assert model.script == []
    finally:
        server.stop()
        model.close()


def test_a_run_reads_only_its_own_events() -> None:
    """Given a stream that starts before its run (the end of the run before
    it), the translator yields nothing until its run.started, and ends at
    its own run's end."""
    tr = Translator(run=2)
    before = [
        agentd.Event(5, "message", {"seq": 5, "type": "TextMessage", "role": "assistant", "name": "a",
                                    "content": "old"}),
        agentd.Event(6, "chat.completed", {"status": "completed", "stop_reason": "max_round",
                                           "stop_detail": "one", "run": 1}),
    ]
    assert [tr.feed(e) for e in before] == [[], []] and tr.end is None and not tr.in_run
    tr.feed(agentd.Event(7, "run.started", {"run": 2}))
    task = tr.feed(agentd.Event(8, "message", {"seq": 8, "type": "HandoffMessage", "role": "user", "name": "user",
                                               "content": "Over to you.", "handoff": "b"}))
    assert task == [{"source": "user", "models_usage": None, "metadata": {}, "type": "HandoffMessage",
                     "content": "Over to you.", "target": "b", "context": []}]
    tr.feed(agentd.Event(9, "chat.completed", {"status": "completed", "stop_reason": "max_round",
                                               "stop_detail": "two", "run": 2}))
    assert tr.end is not None and tr.end.stop_reason == "two" and not tr.in_run


def test_task_messages_can_be_left_out() -> None:
    tr = Translator(output_task_messages=False)
    task = agentd.Event(2, "message", {"seq": 2, "type": "TextMessage", "role": "user", "name": "user",
                                       "content": "Do it."})
    assert tr.feed(task) == []
    tr.feed(agentd.Event(3, "speaker.selected", {"agent": "a", "method": "round_robin"}))
    reply = agentd.Event(4, "message", {"seq": 4, "type": "TextMessage", "role": "assistant", "name": "a",
                                        "content": "Done.", "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    want = {"source": "a", "type": "TextMessage", "content": "Done.", "metadata": {},
            "models_usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    assert tr.feed(reply) == [want]
    tr.feed(agentd.Event(5, "chat.failed", {"status": "failed", "stop_reason": "error", "stop_detail": "",
                                            "error": "replay exhausted"}))
    assert tr.end is not None and tr.end.status == "failed" and tr.end.error == "replay exhausted"


def test_missed_deltas_are_made_up_from_the_message() -> None:
    tr = Translator(streaming={"w"})
    tr.feed(agentd.Event(3, "speaker.selected", {"agent": "w", "method": "round_robin"}))
    first = tr.feed(agentd.Event(None, "message.delta", {"name": "w", "content": "Hel"}))
    assert [d["content"] for d in first] == ["Hel"]
    out = tr.feed(agentd.Event(4, "message", {"seq": 4, "type": "TextMessage", "role": "assistant", "name": "w",
                                              "content": "Hello."}))
    got = [(d["type"], d["content"]) for d in out]
    assert got == [("ModelClientStreamingChunkEvent", "lo."), ("TextMessage", "Hello.")]
    # Deltas of agents that do not stream are not AgentChat events.
    assert tr.feed(agentd.Event(None, "message.delta", {"name": "other", "content": "x"})) == []


def test_structured_messages_as_agentchat_names_them() -> None:
    """A StructuredMessage is named after its agent's content type with the
    agent's format string, both from the component; of an agent the
    component does not describe, it is a plain StructuredMessage."""
    rec = json.loads((pathlib.Path(__file__).parent / "testdata" / "agentchat" / "structured.json").read_text())
    types = structured_types(rec["component"])
    assert sorted(types) == ["planner", "reviewer"]
    assert types["planner"].name == "Plan" and types["reviewer"].format_string is None
    assert types["planner"].json_schema is not None and "steps" in types["planner"].json_schema["properties"]
    tr = Translator(structured={"p": StructuredType("Plan", "{a}")})
    tr.feed(agentd.Event(3, "speaker.selected", {"agent": "p", "method": "round_robin"}))
    data = {"seq": 4, "type": "StructuredMessage", "role": "assistant", "name": "p", "content": "x",
            "structured": {"a": "x"}, "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    assert tr.feed(agentd.Event(4, "message", data)) == [{
        "source": "p", "type": "StructuredMessage[Plan]", "content": {"a": "x"}, "format_string": "{a}",
        "metadata": {}, "models_usage": {"prompt_tokens": 3, "completion_tokens": 1}}]
    tr.feed(agentd.Event(5, "speaker.selected", {"agent": "q", "method": "round_robin"}))
    out = tr.feed(agentd.Event(6, "message", dict(data, seq=6, name="q")))
    assert [(d["type"], d["content"], d["format_string"]) for d in out] == [("StructuredMessage", {"a": "x"}, None)]
