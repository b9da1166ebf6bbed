"""The event-stream decoder and the resume bookkeeping, on their own."""

from __future__ import annotations

from agentd._sse import Event, ResumeState, SSEDecoder


def decode(text: str) -> tuple[list[Event], SSEDecoder]:
    d = SSEDecoder()
    out = []
    for line in text.split("\n"):
        ev = d.decode(line)
        if ev is not None:
            out.append(ev)
    return out, d


def test_events_comments_retry_and_multiline_data() -> None:
    events, d = decode(
        "retry: 2000\n\n"
        ": heartbeat\n\n"
        "id: 7\nevent: message\ndata: {\"a\":\ndata: 1}\n\n"
        "event: message.delta\ndata: {\"name\":\"x\",\"content\":\"hi\"}\n\n"
        "id: 8\nevent: chat.completed\ndata:{\"status\":\"completed\"}\n\n"
    )
    assert d.retry_ms == 2000
    assert events == [
        Event(7, "message", {"a": 1}),
        Event(None, "message.delta", {"name": "x", "content": "hi"}),
        Event(8, "chat.completed", {"status": "completed"}),
    ]
    assert events[2].terminal and not events[0].terminal


def test_an_event_cut_short_is_dropped() -> None:
    d = SSEDecoder()
    for line in ["id: 3", "event: message", "data: {\"partial\":"]:
        assert d.decode(line) is None
    d.reset()
    assert d.decode("") is None
    assert d.decode("data: \"whole\"") is None
    assert d.decode("") == Event(None, "message", "whole")


def test_resume_state_never_delivers_a_seq_twice() -> None:
    s = ResumeState(last_seq=2)
    assert not s.accept(Event(1, "message", {}))
    assert not s.accept(Event(2, "message", {}))
    assert s.accept(Event(3, "message", {}))
    assert s.accept(Event(None, "message.delta", {}))
    assert not s.accept(Event(3, "message", {}))
    assert s.accept(Event(4, "chat.completed", {})) and s.done and s.last_seq == 4
    follow = ResumeState(follow=True)
    assert follow.accept(Event(1, "chat.completed", {})) and not follow.done
