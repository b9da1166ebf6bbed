"""What the sync and the async client share: configuration, the requests of
every operation, and the reading of answers. Only the I/O differs between
the two clients."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Sequence
from urllib.parse import quote

import httpx

from ._errors import error_from_response
from ._types import Approval, Content, MetadataValue, RunRequest, Task
from ._version import __version__

DEFAULT_URL = "http://127.0.0.1:8080"
#: Seconds for ordinary requests (connect, read, write, pool).
DEFAULT_TIMEOUT = 30.0
#: Seconds an event stream may stay silent before it is taken for dead and
#: resumed: the server sends a heartbeat every 15 s.
DEFAULT_STREAM_READ_TIMEOUT = 60.0
#: Statuses after which a stream reconnects rather than fails.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass
class Request:
    """One API request, ready for either client to send."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Extra seconds of read time (a long poll's wait).
    wait_s: float = 0.0


def chat_path(chat_id: str, tail: str = "") -> str:
    """The path of a chat (or of a resource below it)."""
    if not chat_id:
        raise ValueError("chat_id is empty")
    return f"/v1/chats/{quote(chat_id, safe='')}{tail}"


def team_path(name: str, tail: str = "") -> str:
    """The path of a saved team (or of a resource below it). The server
    judges the name (a 422 on a save, a 404 otherwise)."""
    if not name:
        raise ValueError("the team name is empty")
    return f"/v1/teams/{quote(name, safe='')}{tail}"


def team_component(team: Any) -> dict[str, Any]:
    """An AgentChat team as component JSON: a dict as it is, an object with
    ``dump_component()`` (an AgentChat team) or ``model_dump()`` (its
    ComponentModel) dumped."""
    if isinstance(team, Mapping):
        return dict(team)
    dump = getattr(team, "dump_component", None)
    if callable(dump):
        team = dump()
    model_dump = getattr(team, "model_dump", None)
    if callable(model_dump):
        out = model_dump(mode="json")
        if isinstance(out, dict):
            return out
    raise TypeError("team must be an AgentChat team, its ComponentModel or its component JSON as a dict")


class ClientConfig:
    """The settings of a client: arguments first, then ``AGENTD_URL`` and
    ``AGENTD_API_KEY``, then the defaults."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        timeout: float | httpx.Timeout | None,
        stream_read_timeout: float | None,
        reconnect_delay: float | None,
        max_reconnects: int | None,
    ) -> None:
        self.base_url = (base_url or os.environ.get("AGENTD_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("AGENTD_API_KEY") or None
        if isinstance(timeout, httpx.Timeout):
            self.timeout = timeout
        else:
            self.timeout = httpx.Timeout(DEFAULT_TIMEOUT if timeout is None else timeout)
        self.stream_timeout = httpx.Timeout(
            self.timeout.connect,
            read=DEFAULT_STREAM_READ_TIMEOUT if stream_read_timeout is None else stream_read_timeout,
            write=self.timeout.write,
            pool=self.timeout.pool,
        )
        self.reconnect_delay = reconnect_delay
        self.max_reconnects = max_reconnects

    def headers(self) -> dict[str, str]:
        h = {"User-Agent": f"agentd-python/{__version__}", "Accept": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def request_timeout(self, req: Request) -> httpx.Timeout:
        if req.wait_s <= 0 or self.timeout.read is None:
            return self.timeout
        return httpx.Timeout(
            self.timeout.connect, read=self.timeout.read + req.wait_s, write=self.timeout.write, pool=self.timeout.pool
        )


def result(resp: httpx.Response) -> Any:
    """The JSON body of a successful answer; raises the problem of an error."""
    if resp.status_code >= 400:
        raise error_from_response(resp.status_code, resp.headers, resp.content)
    if resp.status_code == 204 or not resp.content:
        return None
    return resp.json()


def _include(params: dict[str, str], include_spec: bool) -> dict[str, str]:
    if include_spec:
        params["include"] = "spec"
    return params


# The requests of every operation (api/openapi.yaml and api/openapi.yaml).


def create_request(
    spec: Mapping[str, Any], idempotency_key: str | None, wait_s: float | None, include_spec: bool
) -> Request:
    req = Request("POST", "/v1/chats", json=dict(spec))
    if idempotency_key is not None:
        req.headers["Idempotency-Key"] = idempotency_key
    if wait_s:
        req.params["wait_s"] = str(int(wait_s))
        req.wait_s = wait_s
    _include(req.params, include_spec)
    return req


def team_spec(task: Task, team: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The team form of a create: ``{"task", "team", ...options}``."""
    body: dict[str, Any] = {"task": task, "team": team_component(team)}
    body.update({k: v for k, v in options.items() if v is not None})
    return body


def _metadata_value(value: MetadataValue) -> str:
    """A metadata filter's value as the query writes it: a string as it is,
    anything else as its JSON (``true``, ``null``, ``3``)."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    raise TypeError(f"a metadata filter's value must be a str, number, bool or None, not {type(value).__name__}")


def _time(name: str, value: str | datetime) -> str:
    """An RFC 3339 time for a query parameter."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{name}: give a datetime with a time zone (RFC 3339 needs one)")
        return value.isoformat()
    return value


@dataclass
class ChatFilter:
    """The filters of ``GET /v1/chats``, which every page of one listing
    repeats."""

    status: str | None = None
    metadata: Mapping[str, MetadataValue] | None = None
    name: str | None = None
    team: str | None = None
    created_after: str | datetime | None = None
    created_before: str | datetime | None = None

    def params(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.status:
            out["status"] = self.status
        for key, value in (self.metadata or {}).items():
            out["metadata." + key] = _metadata_value(value)
        if self.name is not None:
            out["name"] = self.name
        if self.team is not None:
            out["team"] = self.team
        if self.created_after is not None:
            out["created_after"] = _time("created_after", self.created_after)
        if self.created_before is not None:
            out["created_before"] = _time("created_before", self.created_before)
        return out


def _page(req: Request, limit: int | None, cursor: str | None, include_spec: bool) -> Request:
    """req asking for one page of a list: its size, where it starts, and
    whether each item carries its spec."""
    if limit is not None:
        req.params["limit"] = str(limit)
    if cursor:
        req.params["cursor"] = cursor
    _include(req.params, include_spec)
    return req


def list_request(flt: ChatFilter, limit: int | None, cursor: str | None, include_spec: bool) -> Request:
    return _page(Request("GET", "/v1/chats", params=flt.params()), limit, cursor, include_spec)


def get_request(chat_id: str, include_spec: bool) -> Request:
    return Request("GET", chat_path(chat_id), params=_include({}, include_spec))


def messages_request(chat_id: str, after: int, limit: int | None, wait_s: float | None) -> Request:
    req = Request("GET", chat_path(chat_id, "/messages"), params={"after": str(after)})
    if limit is not None:
        req.params["limit"] = str(limit)
    if wait_s:
        req.params["wait_s"] = str(int(wait_s))
        req.wait_s = wait_s
    return req


def input_request(
    chat_id: str,
    request_id: str,
    content: Content | None,
    speaker: str | None,
    approvals: Sequence[Approval] | None,
) -> Request:
    body: dict[str, Any] = {"request_id": request_id}
    given = [k for k, v in (("content", content), ("speaker", speaker), ("approvals", approvals)) if v is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of content, speaker and approvals")
    if content is not None:
        body["content"] = content if isinstance(content, str) else [
            p if isinstance(p, str) else dict(p) for p in content]
    if speaker is not None:
        body["speaker"] = speaker
    if approvals is not None:
        body["approvals"] = [dict(a) for a in approvals]
    return Request("POST", chat_path(chat_id, "/input"), json=body)


def cancel_request(chat_id: str) -> Request:
    return Request("POST", chat_path(chat_id, "/cancel"))


def team_request(chat_id: str) -> Request:
    return Request("GET", chat_path(chat_id, "/team"))


def run_request(
    chat_id: str,
    task: Task | None,
    if_busy: str | None,
    max_round: int | None,
    context_variables: Mapping[str, Any] | None = None,
) -> Request:
    body: dict[str, Any] = {}
    if task is not None:
        body["task"] = task
    if if_busy is not None:
        body["if_busy"] = if_busy
    if max_round is not None:
        body["max_round"] = max_round
    if context_variables is not None:
        body["context_variables"] = dict(context_variables)
    return Request("POST", chat_path(chat_id, "/runs"), json=body)


def stop_request(chat_id: str) -> Request:
    return Request("POST", chat_path(chat_id, "/stop"))


def fork_request(
    chat_id: str, at_seq: int | None, run: RunRequest | None, context_variables: Mapping[str, Any] | None = None
) -> Request:
    body: dict[str, Any] = {}
    if at_seq is not None:
        body["at_seq"] = at_seq
    if run is not None:
        body["run"] = dict(run)
    if context_variables is not None:
        body["context_variables"] = dict(context_variables)
    return Request("POST", chat_path(chat_id, "/fork"), json=body)


def patch_request(
    chat_id: str,
    metadata: Mapping[str, Any] | None,
    include_spec: bool,
    context_variables: Mapping[str, Any] | None = None,
) -> Request:
    if metadata is None and context_variables is None:
        raise ValueError("patch needs metadata, context_variables or both")
    body: dict[str, Any] = {}
    if metadata is not None:
        body["metadata"] = dict(metadata)
    if context_variables is not None:
        body["context_variables"] = dict(context_variables)
    return Request("PATCH", chat_path(chat_id), params=_include({}, include_spec), json=body)


def erase_request(chat_id: str) -> Request:
    return Request("DELETE", chat_path(chat_id))


def deliveries_request(chat_id: str, after: int, limit: int | None) -> Request:
    req = Request("GET", chat_path(chat_id, "/deliveries"))
    if after:
        req.params["after"] = str(after)
    if limit is not None:
        req.params["limit"] = str(limit)
    return req


def save_team_request(name: str, team: Any) -> Request:
    """``PUT /v1/teams/{name}``: a spec without a task or an AgentChat
    component (a dict as it is), or an AgentChat team object (or its
    ComponentModel) as its component JSON."""
    return Request("PUT", team_path(name), json=team_component(team))


def get_team_request(name: str, version: int | None) -> Request:
    if version is None:
        return Request("GET", team_path(name))
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError("version must be a positive int")
    return Request("GET", team_path(name, f"/versions/{version}"))


def list_teams_request(limit: int | None, cursor: str | None, include_spec: bool) -> Request:
    return _page(Request("GET", "/v1/teams"), limit, cursor, include_spec)


def team_ref_spec(team_ref: str, version: int | None, task: Task, options: Mapping[str, Any]) -> dict[str, Any]:
    """The saved-team form of a create: ``{"team_ref": "name" | "name@N",
    "task", ...overrides}``."""
    if version is not None:
        if "@" in team_ref:
            raise ValueError("give the version in team_ref (name@N) or as version, not both")
        team_ref = f"{team_ref}@{version}"
    body: dict[str, Any] = {"team_ref": team_ref, "task": task}
    body.update({k: v for k, v in options.items() if v is not None})
    return body


def events_params(follow: bool) -> dict[str, str]:
    return {"follow": "true"} if follow else {}


def reconnect_delay(configured: float | None, retry_ms: int | None, retry_after: float | None) -> float:
    """How long to wait before resuming a stream: the server's Retry-After,
    else the client's setting, else the stream's ``retry`` field (2 s)."""
    if retry_after is not None:
        return retry_after
    if configured is not None:
        return configured
    return (retry_ms if retry_ms is not None else 2000) / 1000.0
