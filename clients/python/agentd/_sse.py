"""Server-sent events: the decoder for agentd's event stream and the
bookkeeping that makes a resumed stream yield every event exactly once."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: The events that end a stream (the chat's, or with runs the run's, end).
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
        """The event ends the chat (or the run): ``chat.completed``,
        ``chat.failed`` or ``chat.cancelled``."""
        return self.event in TERMINAL_EVENTS


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
    so that a resumed stream never yields an event twice."""

    last_seq: int = 0
    follow: bool = False
    done: bool = False

    def accept(self, ev: Event) -> bool:
        """Whether to deliver ev; moves the resume point past it."""
        if ev.id is not None:
            if ev.id <= self.last_seq:
                return False
            self.last_seq = ev.id
        if ev.terminal and not self.follow:
            self.done = True
        return True
