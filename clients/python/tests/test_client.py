"""The sync client against the real agentd binary: every call of the API."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from typing import Callable

import pytest

import agentd
import specs
from support import Agentd, ScriptedModel


def client_for(server: Agentd) -> agentd.Client:
    return agentd.Client(server.url, reconnect_delay=0.05)


def test_create_wait_get_and_spec(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.debate(), wait_s=30)
        assert chat["status"] == "completed"
        assert chat["stop_reason"] == "text_mention"
        assert chat["stop_detail"] == "Text 'TERMINATE' mentioned"
        assert "spec" not in chat
        got = c.get(chat["id"], include_spec=True)
        assert got["id"] == chat["id"] and got["turns"] == chat["turns"] == 3
        assert got["spec"]["task"] == specs.debate()["task"]
        assert got["last_seq"] == chat["last_seq"]


def test_idempotency_key(server: Agentd) -> None:
    key = "py-" + uuid.uuid4().hex
    with client_for(server) as c:
        first = c.create(specs.debate(), idempotency_key=key)
        again = c.create(specs.debate(), idempotency_key=key)
        assert again["id"] == first["id"]
        with pytest.raises(agentd.ConflictError) as e:
            c.create(specs.debate(task="Something else."), idempotency_key=key)
        assert e.value.status == 409 and e.value.type == "urn:agentd:problem:conflict"
        assert e.value.request_id


def test_list_pages_and_status(server: Agentd) -> None:
    with client_for(server) as c:
        made = [c.create(specs.debate(), wait_s=30)["id"] for _ in range(3)]
        page = c.list(limit=2)
        assert len(page["chats"]) == 2 and page["next_cursor"]
        # Newest first: the last three made lead the list.
        assert [x["id"] for x in page["chats"]] == made[::-1][:2]
        nxt = c.list(limit=2, cursor=page["next_cursor"])
        assert nxt["chats"][0]["id"] == made[0]
        every = [x["id"] for x in c.iter_chats(page_size=2)]
        assert every[:3] == made[::-1] and len(every) == len(set(every))
        assert all(x["status"] == "completed" for x in c.iter_chats(status="completed"))
        assert all(x["status"] == "queued" for x in c.list(status="queued")["chats"])


def test_messages_and_long_poll(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.debate(delay_ms=50))
        seen = list(c.iter_messages(chat["id"], wait_s=10))
        assert [m["name"] for m in seen] == ["user", "pro", "con", "judge"]
        assert seen[-1]["content"] == "Verdict: yes. TERMINATE"
        assert all(m["type"] == "TextMessage" for m in seen)
        seqs = [m["seq"] for m in seen]
        assert seqs == sorted(set(seqs))
        page = c.messages(chat["id"], after=seqs[1], limit=1)
        assert [m["seq"] for m in page["messages"]] == [seqs[2]]
        assert page["status"] == "completed"


def test_events_whole_log_and_resume(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.debate(delay_ms=30))
        with c.events(chat["id"]) as stream:
            events = list(stream)
            assert stream.last_event_id == events[-1].id
        assert [e.id for e in events] == list(range(1, len(events) + 1))
        assert events[0].event == "chat.created"
        assert events[-1].event == "chat.completed" and events[-1].terminal
        assert events[-1].data["stop_reason"] == "text_mention"
        assert [e.data["name"] for e in events if e.event == "message"] == ["user", "pro", "con", "judge"]
        # Resuming after seq 4 gives exactly the rest; after the end, nothing (204).
        rest = list(c.events(chat["id"], after=4))
        assert rest == events[4:]
        assert list(c.events(chat["id"], after=events[-1].id or 0)) == []


def test_deltas_from_a_streaming_model(agentd_bin: str) -> None:
    # The model answers only once the stream is open, so that the stream
    # sees the reply's deltas (they are ephemeral: never replayed).
    hold = threading.Event()
    model = ScriptedModel([{"content": "A reply long enough to come in several pieces."}], hold=hold)
    s = Agentd(agentd_bin, {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "test"})
    try:
        spec = {
            "task": "Say something.",
            "agents": [{"name": "talker", "type": "assistant",
                        "model": {"provider": "openai", "model": "gpt-4o-mini"}}],
            "max_round": 1,
        }
        with agentd.Client(s.url) as c:
            chat = c.create(spec)
            stream = c.events(chat["id"])
            # The turn's speaker.selected is committed alone once the turn
            # takes 20 ms; the deltas follow it.
            events = []
            for e in stream:
                events.append(e)
                if e.event == "speaker.selected":
                    break
            hold.set()
            events += list(stream)
        deltas = [e for e in events if e.event == "message.delta"]
        reply = [e for e in events if e.event == "message" and e.data["name"] == "talker"][0]
        assert len(deltas) > 1 and all(d.id is None and d.data["name"] == "talker" for d in deltas)
        assert "".join(d.data["content"] for d in deltas) == reply.data["content"]
        assert events.index(deltas[-1]) < events.index(reply)
        assert reply.data["content"] == "A reply long enough to come in several pieces."
        assert reply.data["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}
        assert model.requests[0]["stream"] is True
    finally:
        s.stop()
        model.close()


def test_structured_output(server: Agentd) -> None:
    """A structured-output agent's reply: its text in content, its object
    (defaults filled in, as pydantic reads the model's JSON) in structured,
    in the messages, the events and the spec the chat keeps."""
    with client_for(server) as c:
        chat = c.create(specs.structured(), wait_s=30)
        assert chat["status"] == "completed"
        msgs = c.messages(chat["id"])["messages"]
        plan = [m for m in msgs if m["type"] == "StructuredMessage[Plan]"]
        assert len(plan) == 1 and plan[0]["name"] == "planner"
        want: dict[str, object] = {"title": "Rotate logs", "steps": ["rename", "reopen"], "priority": 2, "note": None}
        assert plan[0].get("structured") == want
        assert list(plan[0].get("structured", {})) == ["title", "steps", "priority", "note"]
        assert plan[0]["content"] == "Rotate logs (priority 2): ['rename', 'reopen']"
        assert [m.get("structured") for m in msgs if m["name"] == "writer"] == [None]
        evs = [e.data for e in c.events(chat["id"]) if e.event == "message" and e.data.get("name") == "planner"]
        assert [e.get("structured") for e in evs] == [want]
        spec = c.get(chat["id"], include_spec=True)["spec"]
        assert spec["agents"][0]["output_schema"]["name"] == "Plan"


def test_manual_speaker_and_stale_request(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.manual(), wait_s=10)
        assert chat["status"] == "awaiting_input"
        pending = chat["pending_input"]
        assert pending is not None and pending["kind"] == "speaker"
        assert pending["candidates"] == ["colours", "fruits"]
        after = c.send_input(chat["id"], pending["request_id"], speaker="colours")
        assert after["id"] == chat["id"]
        with pytest.raises(agentd.ConflictError) as e:
            c.send_input(chat["id"], pending["request_id"], speaker="fruits")
        assert e.value.type == "urn:agentd:problem:no-pending-input"
        chat = c.create({"task": "x", **{k: v for k, v in specs.manual().items() if k != "task"}}, wait_s=10)
        with pytest.raises(agentd.ValidationError) as v:
            c.send_input(chat["id"], "", speaker="colours")
        assert [p.path for p in v.value.errors] == ["/request_id"]


def test_human_message(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.human(), wait_s=10)
        pending = chat["pending_input"]
        assert pending is not None and pending["kind"] == "message" and pending["agent"] == "editor"
        c.send_input(chat["id"], pending["request_id"], content="Mention Last-Event-ID.")
        deadline = time.monotonic() + 20
        while True:
            chat = c.get(chat["id"])
            if chat["status"] == "awaiting_input" and chat["pending_input"] and \
                    chat["pending_input"]["request_id"] != pending["request_id"]:
                break
            assert time.monotonic() < deadline, chat
            time.sleep(0.05)
        assert chat["pending_input"] is not None
        c.send_input(chat["id"], chat["pending_input"]["request_id"], content="exit")
        msgs = [m for m in c.iter_messages(chat["id"], wait_s=10)]
        assert [(m["name"], m["content"]) for m in msgs][:4] == [
            ("user", "Draft a one-line release note."),
            ("writer", "Draft 1."),
            ("editor", "Mention Last-Event-ID."),
            ("writer", "Draft 2."),
        ]
        end = c.get(chat["id"])
        assert end["status"] == "completed" and end["stop_reason"] == "human_exit"


def test_input_needs_exactly_one_answer() -> None:
    with agentd.Client("http://127.0.0.1:9") as c:
        with pytest.raises(ValueError):
            c.send_input("x", "r")
        with pytest.raises(ValueError):
            c.send_input("x", "r", content="a", speaker="b")


def test_cancel(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.slow())
        with c.events(chat["id"]) as stream:
            first = next(stream)
            assert first.event == "chat.created"
            cancelled = c.cancel(chat["id"])
            assert cancelled["id"] == chat["id"]
            rest = list(stream)
        assert rest[-1].event == "chat.cancelled"
        assert rest[-1].data["stop_reason"] == "cancelled"
        again = c.cancel(chat["id"])  # 200, unchanged
        assert again["status"] == "cancelled"


def test_export_team_and_create_from_team(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.debate(), wait_s=30)
        team = c.export_team(chat["id"])
        assert team["provider"] == "autogen_agentchat.teams.RoundRobinGroupChat"
        again = c.create_from_team(team, "Is Go a good fit for servers?", wait_s=30, name="again")
        assert again["name"] == "again"
        assert again["status"] == "completed" and again["stop_detail"] == chat["stop_detail"]
        assert again["warnings"] == []
        first = [m["content"] for m in c.messages(chat["id"])["messages"]]
        second = [m["content"] for m in c.messages(again["id"])["messages"]]
        assert first == second


def test_validation_problems_with_paths(server: Agentd) -> None:
    with client_for(server) as c:
        with pytest.raises(agentd.ValidationError) as e:
            c.create({"task": "", "agents": [{"name": "1x", "type": "robot"}], "max_round": 0})
        err = e.value
        assert err.status == 422 and err.type == "urn:agentd:problem:validation-failed"
        assert err.title == "Unprocessable Entity"
        paths = [p.path for p in err.errors]
        assert {"/task", "/max_round", "/agents/0/name", "/agents/0/type"} <= set(paths), paths
        assert all(p.message for p in err.errors)
        assert err.detail.startswith(f"the request is invalid: {len(paths)} problem(s)")
        for p in paths:
            assert p in str(err)


def test_team_problems_with_paths(server: Agentd) -> None:
    bad = {
        "provider": "autogen_agentchat.teams.RoundRobinGroupChat",
        "component_type": "team",
        "config": {"participants": [{"provider": "my.module.Agent", "component_type": "agent", "config": {}}]},
    }
    with client_for(server) as c:
        with pytest.raises(agentd.ValidationError) as e:
            c.create_from_team(bad, "hi")
        assert any(p.path.startswith("/team/config/participants/0") for p in e.value.errors), e.value.errors


def test_not_found_and_bad_request(server: Agentd) -> None:
    with client_for(server) as c:
        missing = str(uuid.uuid4())
        calls: list[Callable[[], object]] = [
            lambda: c.get(missing), lambda: c.cancel(missing), lambda: list(c.events(missing))]
        for call in calls:
            with pytest.raises(agentd.NotFoundError) as e:
                call()
            assert e.value.type == "urn:agentd:problem:not-found" and e.value.status == 404
        with pytest.raises(agentd.BadRequestError) as b:
            c.list(limit=0)
        assert [p.path for p in b.value.errors] == ["limit"]


def test_api_key_from_argument_and_environment(keyed_server: Agentd, monkeypatch: pytest.MonkeyPatch) -> None:
    with agentd.Client(keyed_server.url, api_key="wrong") as c:
        with pytest.raises(agentd.AuthenticationError) as e:
            c.list()
        assert e.value.type == "urn:agentd:problem:unauthorized"
    monkeypatch.setenv("AGENTD_URL", keyed_server.url)
    monkeypatch.setenv("AGENTD_API_KEY", "py-client-key-0123456789")
    with agentd.Client() as c:
        assert c.base_url == keyed_server.url
        chat = c.create(specs.debate(), wait_s=30)
        assert chat["status"] == "completed"
        assert [e.event for e in c.events(chat["id"])][-1] == "chat.completed"


def test_connection_error() -> None:
    with socket_closed_port() as port:
        with agentd.Client(f"http://127.0.0.1:{port}", timeout=2) as c:
            with pytest.raises(agentd.APIConnectionError):
                c.list()
        with agentd.Client(f"http://127.0.0.1:{port}", reconnect_delay=0.01, max_reconnects=2) as c:
            stream = c.events(str(uuid.uuid4()))
            with pytest.raises(agentd.APIConnectionError):
                list(stream)
            assert stream.reconnects == 2


class socket_closed_port:
    """A loopback port nothing listens on."""

    def __init__(self) -> None:
        self.port = 0

    def __enter__(self) -> int:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        return self.port

    def __exit__(self, *exc: object) -> None:
        pass


def test_problem_from_a_body_that_is_not_json() -> None:
    err = agentd._errors.error_from_response(502, {"x-request-id": "r1"}, b"<html>bad gateway</html>")
    assert isinstance(err, agentd.InternalServerError) and err.status == 502
    assert err.detail == "<html>bad gateway</html>" and err.request_id == "r1"
    body = json.dumps({"type": "urn:agentd:problem:rate-limited", "title": "Too Many Requests", "status": 429,
                       "detail": "slow down", "errors": []}).encode()
    limited = agentd._errors.error_from_response(429, {"retry-after": "3"}, body)
    assert isinstance(limited, agentd.RateLimitError) and limited.retry_after == 3.0
