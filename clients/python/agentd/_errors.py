"""Exceptions: every error answer of agentd is an :class:`APIError` carrying
the fields of its RFC 9457 problem details."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Problem:
    """One problem of a request: a JSON pointer into the body (or the name of
    the query parameter or header at fault) and what is wrong there."""

    path: str
    message: str


class AgentdError(Exception):
    """The base of every exception this package raises."""


class APIConnectionError(AgentdError):
    """The server could not be reached, or the connection broke (after the
    retries a stream makes)."""


class RunFailedError(AgentdError, RuntimeError):
    """A chat (or run) ended with status ``failed``; ``error`` is agentd's
    account of why. A RuntimeError too, as AgentChat raises one when a team's
    run fails."""

    def __init__(self, chat_id: str, error: str) -> None:
        super().__init__(error)
        self.chat_id = chat_id
        self.error = error


class APIError(AgentdError):
    """An error answer (4xx or 5xx) from agentd.

    ``type``, ``title``, ``status``, ``detail`` and ``errors`` are the
    problem's fields (``errors`` as :class:`Problem` objects, each with its
    ``path``); ``request_id`` is the ``X-Request-Id`` to quote when reporting
    it and ``retry_after`` the seconds a 429 or 503 asks to wait.
    """

    def __init__(
        self,
        status: int,
        *,
        type: str = "about:blank",
        title: str = "",
        detail: str = "",
        errors: list[Problem] | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.errors: list[Problem] = list(errors or [])
        self.request_id = request_id
        self.retry_after = retry_after
        self.body = body
        super().__init__(self._text())

    def _text(self) -> str:
        head = f"{self.status} {self.title}".strip()
        if self.detail:
            head += f": {self.detail}"
        return "\n".join([head] + [f"  {p.path}: {p.message}" for p in self.errors])


class BadRequestError(APIError):
    """400: the body is not one well-formed JSON value, or a query parameter
    or header is invalid."""


class AuthenticationError(APIError):
    """401: a missing or invalid API key."""


class PermissionDeniedError(APIError):
    """403: the request's origin is refused."""


class NotFoundError(APIError):
    """404: no such chat for this tenant (or no such route), or no such
    saved team or version (type ``urn:agentd:problem:team-not-found``)."""


class ConflictError(APIError):
    """409: an Idempotency-Key reused with another body, no pending input (or
    a stale request_id), a chat busy with a run (:class:`RunActiveError`),
    a chat whose log cannot be run again, or the erasure of a chat that has
    not ended (:class:`ChatNotEndedError`)."""


#: The problem type of a run posted while another is active or queued.
RUN_ACTIVE = "urn:agentd:problem:run-active"

_RUN_IN_DETAIL = re.compile(r"\brun (\d+)\b")


class RunActiveError(ConflictError):
    """409 ``urn:agentd:problem:run-active``: a run was posted with
    ``if_busy`` ``reject`` (the default) while run ``run`` is active or about
    to start. Post it with ``if_busy="enqueue"`` to run after it, or
    ``"interrupt"`` to cancel it. ``run`` is read from the problem's detail
    (``None`` if the detail does not name one); the problem's own fields
    are kept as on every :class:`APIError`."""

    def __init__(self, status: int, **kwargs: Any) -> None:
        super().__init__(status, **kwargs)
        m = _RUN_IN_DETAIL.search(self.detail)
        self.run: int | None = int(m.group(1)) if m else None


#: The problem type of the erasure of a chat that has not ended.
CHAT_NOT_ENDED = "urn:agentd:problem:chat-not-ended"


class ChatNotEndedError(ConflictError):
    """409 ``urn:agentd:problem:chat-not-ended``: a chat was to be erased
    while it runs, waits for input or has a run waiting to start. Cancel
    it, then erase it."""


class ContentTooLargeError(APIError):
    """413: the body exceeds the server's limit."""


class UnsupportedMediaTypeError(APIError):
    """415: a body that is not application/json."""


class ValidationError(APIError):
    """422: the request is well-formed but invalid; ``errors`` lists every
    problem, each with its JSON pointer."""


class RateLimitError(APIError):
    """429: the key's request rate or open streams are at their limit."""


class InternalServerError(APIError):
    """500: an unexpected server error (the server log has it under
    ``request_id``)."""


class UnavailableError(APIError):
    """503: the database cannot be reached, or the server is draining or at
    its stream limit; retry after ``retry_after``."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: ContentTooLargeError,
    415: UnsupportedMediaTypeError,
    422: ValidationError,
    429: RateLimitError,
    500: InternalServerError,
    503: UnavailableError,
}


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def error_from_response(status: int, headers: Mapping[str, str], content: bytes) -> APIError:
    """The exception for an error answer: its problem details when the body is
    one, else the status alone (a proxy's HTML page, say)."""
    cls = _BY_STATUS.get(status, InternalServerError if status >= 500 else APIError)
    body: Any = None
    try:
        body = json.loads(content) if content else None
    except ValueError:
        body = content.decode("utf-8", "replace")
    fields: dict[str, Any] = {}
    if isinstance(body, dict):
        for key in ("type", "title", "detail"):
            if isinstance(body.get(key), str):
                fields[key] = body[key]
        errors = body.get("errors")
        if isinstance(errors, list):
            fields["errors"] = [
                Problem(str(e.get("path", "")), str(e.get("message", ""))) for e in errors if isinstance(e, dict)
            ]
    elif isinstance(body, str) and body:
        fields["detail"] = body[:500]
    if status == 409 and fields.get("type") == RUN_ACTIVE:
        cls = RunActiveError
    elif status == 409 and fields.get("type") == CHAT_NOT_ENDED:
        cls = ChatNotEndedError
    return cls(
        status,
        request_id=headers.get("x-request-id"),
        retry_after=_retry_after(headers.get("retry-after")),
        body=body,
        **fields,
    )
