"""Server-sent events: the decoder for agentd's event stream and the
bookkeeping that makes a resumed stream yield every event exactly once."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: The events that end a run (and the chat's status with it).
TERMINAL_EVENTS = frozenset({"chat.completed", "chat.failed", "chat.cancelled"})


@dataclass(frozen=True)
class Event:
    """One server-sent event of ``GET /v1/chats/{id}/events``.

    ``id`` is the event's seq in the chat's log (``None`` for the ephemeral
    ``message.delta``), ``event`` its type and ``data`` its JSON payload.
    """

    id: int | None
    event: str
    data: Any

    @property
    def terminal(self) -> bool:
        """The event ends a run: ``chat.completed``, ``chat.failed`` or
        ``chat.cancelled``."""
        return self.event in TERMINAL_EVENTS

    @property
    def run(self) -> int | None:
        """The run a ``run.started`` opens or a terminal event ends (a
        terminal event of a log written before runs names none: run 1);
        ``None`` for other events."""
        if self.event != "run.started" and not self.terminal:
            return None
        n = self.data.get("run") if isinstance(self.data, dict) else None
        if isinstance(n, int) and not isinstance(n, bool):
            return n
        return 1 if self.terminal else None


@dataclass
class SSEDecoder:
    """Decodes an event stream line by line (the WHATWG rules: ``data``
    lines joined with newlines, comments ignored, an event dispatched at a
    blank line). An event cut off by a broken connection is never
    dispatched: it ends without its blank line."""

    retry_ms: int | None = None
    _id: str | None = None
    _event: str = ""
    _data: list[str] = field(default_factory=list)

    def decode(self, line: str) -> Event | None:
        """Feeds one line (without its line ending); returns the event that
        a blank line completes."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Event | None:
        ident, event, data = self._id, self._event or "message", self._data
        self._id, self._event, self._data = None, "", []
        if not data:
            return None
        text = "\n".join(data)
        try:
            payload: Any = json.loads(text)
        except ValueError:
            payload = text
        seq: int | None = None
        if ident is not None and ident.isdigit():
            seq = int(ident)
        return Event(id=seq, event=event, data=payload)

    def reset(self) -> None:
        """Drops a partly received event (the connection broke)."""
        self._id, self._event, self._data = None, "", []


@dataclass
class ResumeState:
    """Where a stream is: the last seq delivered, and whether the stream is
    over. The one place that decides which received events reach the caller,
    so that a resumed stream never yields an event twice, and when a stream
    ends.

    A stream that neither follows the chat nor waits for a run ends where
    the server ends it: after the terminal event of the chat's latest run
    (replayed terminal events of earlier runs do not end it). The server
    ends such a response cleanly only there and aborts it anywhere else, so
    a clean end after a terminal event is the end, and any other end a
    break to resume from. With ``until_run`` the stream follows the chat
    and ends with the terminal event of that run, or of a later one (a
    queued run that an interrupt dropped never ends; the run that replaced
    it takes its number).
    """

    last_seq: int = 0
    follow: bool = False
    until_run: int | None = None
    done: bool = False
    #: The last event delivered ends a run.
    at_run_end: bool = False

    @property
    def follows(self) -> bool:
        """Whether the request asks the server to stay open across runs."""
        return self.follow or self.until_run is not None

    def accept(self, ev: Event) -> bool:
        """Whether to deliver ev; moves the resume point past it."""
        if ev.id is not None:
            if ev.id <= self.last_seq:
                return False
            self.last_seq = ev.id
            self.at_run_end = ev.terminal
        if ev.terminal and self.until_run is not None and (ev.run or 1) >= self.until_run:
            self.done = True
        return True

    def ended_cleanly(self) -> bool:
        """The server ended a response cleanly; returns whether the stream is
        over (else it is resumed)."""
        if not self.follows and self.at_run_end:
            self.done = True
        return self.done
