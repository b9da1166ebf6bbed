"""RemoteTeam's translation of agentd's events into AgentChat messages, in CI
where AgentChat is not installed: each AgentChat team recorded in-process
(tests/testdata/agentchat, made by autogen_check/record.py under AgentChat
0.7.5) runs on agentd on the same scripted model, and what the translator
makes of its events must equal what AgentChat's run_stream yielded (JSON
dumps, less id and created_at) and its TaskResult. The AgentChat objects
themselves, Console and run() are compared by autogen_check/check.py, which
needs AgentChat (make test-autogen-client)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

import agentd
from agentd._agentchat import Translator, team_facts
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


def test_recordings_cover_the_three_teams() -> None:
    names = {p.stem for p in RECORDINGS}
    assert names == {"round_robin", "swarm", "selector", "human"}
    providers = {json.loads(p.read_text())["component"]["provider"] for p in RECORDINGS}
    assert providers == {"autogen_agentchat.teams.RoundRobinGroupChat", "autogen_agentchat.teams.Swarm",
                         "autogen_agentchat.teams.SelectorGroupChat"}


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_team_runs_as_agentchat_ran_it(agentd_bin: str, path: pathlib.Path) -> None:
    rec = json.loads(path.read_text())
    model = ScriptedModel(rec["script"])
    server = Agentd(agentd_bin, {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "scripted"})
    try:
        with agentd.Client(server.url) as c:
            chat = c.create_from_team(rec["component"], rec["task"])
            streaming, handoffs = team_facts(rec["component"])
            tr = Translator(streaming, handoffs)
            items: list[dict[str, Any]] = []
            answers = iter(rec.get("answers", []))
            for ev in c.events(chat["id"]):
                items += tr.feed(ev)
                if ev.event == "input.requested":
                    c.send_input(chat["id"], ev.data["request_id"], content=next(answers))
        for it in items:
            # Made anew for every request, by agentd and AgentChat alike.
            assert it.pop("request_id", "x")
        assert tr.end is not None and tr.end.status == "completed"
        assert merge_chunks(items) == merge_chunks(rec["stream"])
        messages = [m for m in items if m["type"] != "ModelClientStreamingChunkEvent"]
        assert {"messages": messages, "stop_reason": tr.end.stop_reason} == rec["result"]
        assert model.script == []
        if path.stem == "round_robin":
            # The writer streams: its replies' deltas reached the stream (they
            # come after a pause, see autogen_check/scenarios.py), more chunks
            # than the two the messages alone would make up.
            assert sum(1 for m in items if m["type"] == "ModelClientStreamingChunkEvent") > 2
    finally:
        server.stop()
        model.close()


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
