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
    assert s.accept(Event(4, "chat.completed", {"run": 1})) and s.last_seq == 4


def test_a_stream_ends_where_the_server_ends_it_after_a_run_end() -> None:
    # A replay of several runs goes on past the end of the first.
    s = ResumeState()
    assert s.accept(Event(5, "chat.completed", {"run": 1})) and not s.done
    assert s.accept(Event(6, "run.started", {"run": 2}))
    # A clean end anywhere but after a terminal event is a break to resume.
    assert not s.ended_cleanly() and not s.done
    assert s.accept(Event(9, "chat.completed", {"run": 2})) and not s.done
    # A delta after it does not make the end of the run any less the end.
    assert s.accept(Event(None, "message.delta", {}))
    assert s.ended_cleanly() and s.done
    # A stream that follows the chat is never over, whatever ended.
    follow = ResumeState(follow=True)
    assert follow.accept(Event(1, "chat.completed", {"run": 1})) and not follow.done
    assert not follow.ended_cleanly()


def test_until_run_ends_with_that_run_or_a_later_one() -> None:
    s = ResumeState(until_run=3)
    assert s.follows
    for seq, run in ((4, 1), (8, 2)):
        assert s.accept(Event(seq, "chat.completed", {"run": run})) and not s.done
    assert s.accept(Event(9, "run.started", {"run": 3})) and not s.done
    assert s.accept(Event(12, "chat.cancelled", {"run": 3})) and s.done
    later = ResumeState(until_run=2)
    assert later.accept(Event(7, "chat.failed", {"run": 4})) and later.done
    # A log written before runs: its one terminal event ends run 1.
    old = ResumeState(until_run=1)
    assert old.accept(Event(7, "chat.completed", {"status": "completed"})) and old.done
    assert Event(7, "chat.completed", {}).run == 1 and Event(3, "message", {"run": 5}).run is None
    assert Event(2, "run.started", {"run": 2}).run == 2
