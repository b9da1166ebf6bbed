"""The synchronous client."""

from __future__ import annotations

import time
from datetime import datetime
from types import TracebackType
from typing import Any, Generator, Iterator, Mapping, Sequence, cast

import httpx

from . import _base as b
from ._errors import APIConnectionError, error_from_response
from ._sse import Event, ResumeState, SSEDecoder
from ._types import (
    Approval,
    Chat,
    ChatList,
    Content,
    DeliveryList,
    IfBusy,
    Message,
    MessageList,
    MetadataValue,
    RunPosted,
    RunRequest,
    Task,
    Team,
    TeamList,
    Webhook,
)


class Client:
    """A client of one agentd server.

    ``base_url`` defaults to ``AGENTD_URL`` (else ``http://127.0.0.1:8080``),
    ``api_key`` to ``AGENTD_API_KEY``. ``timeout`` bounds ordinary requests
    (long polls get their wait on top); an event stream silent for
    ``stream_read_timeout`` seconds (the server sends a heartbeat every 15 s)
    is resumed. A broken stream is resumed after ``reconnect_delay`` seconds
    (default: what the server's ``retry`` field says), at most
    ``max_reconnects`` times in a row (default: without end).
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        stream_read_timeout: float | None = None,
        reconnect_delay: float | None = None,
        max_reconnects: int | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._cfg = b.ClientConfig(base_url, api_key, timeout, stream_read_timeout, reconnect_delay, max_reconnects)
        self._own_http = http_client is None
        self._http = http_client or httpx.Client()

    @property
    def base_url(self) -> str:
        """The server's URL."""
        return self._cfg.base_url

    def close(self) -> None:
        """Closes the connections (not an ``http_client`` given by the caller)."""
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _send(self, req: b.Request) -> Any:
        headers = self._cfg.headers()
        headers.update(req.headers)
        try:
            resp = self._http.request(
                req.method,
                self._cfg.base_url + req.path,
                params=req.params,
                json=req.json,
                headers=headers,
                timeout=self._cfg.request_timeout(req),
            )
        except httpx.TransportError as e:
            raise APIConnectionError(f"{req.method} {req.path}: {e}") from e
        return b.result(resp)

    # Chats.

    def create(
        self,
        spec: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
        include_spec: bool = False,
    ) -> Chat:
        """Creates a chat from a spec (or the team form ``{"task", "team"}``,
        or the saved-team form ``{"team_ref", "task", ...}``).
        With ``idempotency_key`` a retry returns the same chat; with
        ``wait_s`` the answer waits until the chat ends or waits for input."""
        return cast(Chat, self._send(b.create_request(spec, idempotency_key, wait_s, include_spec)))

    def create_from_team(
        self,
        team: Any,
        task: Task,
        *,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
        include_spec: bool = False,
        **options: Any,
    ) -> Chat:
        """Creates a chat that runs an AgentChat team (the team object, its
        ComponentModel or its component JSON) on ``task``; ``options`` are the
        spec's own top-level options (``name``, ``max_round``, ``metadata`` …).
        The answer's ``warnings`` lists what of the team agentd ignores."""
        return self.create(
            b.team_spec(task, team, options),
            idempotency_key=idempotency_key,
            wait_s=wait_s,
            include_spec=include_spec,
        )

    def create_from_saved_team(
        self,
        team_ref: str,
        task: Task,
        *,
        version: int | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        max_round: int | None = None,
        webhook: Webhook | None = None,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
        include_spec: bool = False,
    ) -> Chat:
        """Creates a chat from a saved team (see :meth:`save_team`) with
        ``task``: its latest version, or ``version`` (also written
        ``team_ref="name@N"``). ``name``, ``metadata``, ``max_round`` and
        ``webhook`` replace the team's. The chat's ``team`` records the
        version it ran; an unknown team or version raises
        :class:`ValidationError` at ``/team_ref``. The same as :meth:`create`
        with ``{"team_ref", "task", ...}``."""
        options = {"name": name, "metadata": metadata, "max_round": max_round, "webhook": webhook}
        return self.create(
            b.team_ref_spec(team_ref, version, task, options),
            idempotency_key=idempotency_key,
            wait_s=wait_s,
            include_spec=include_spec,
        )

    def get(self, chat_id: str, *, include_spec: bool = False) -> Chat:
        """The chat."""
        return cast(Chat, self._send(b.get_request(chat_id, include_spec)))

    def list(
        self,
        *,
        status: str | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        name: str | None = None,
        team: str | None = None,
        created_after: str | datetime | None = None,
        created_before: str | datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        include_spec: bool = False,
    ) -> ChatList:
        """One page of chats, newest first; pass ``next_cursor`` as ``cursor``
        (with the same filters) for the next.

        Every filter given must hold: ``status``; ``metadata``, a key and
        value per filter (``metadata.KEY=VALUE``: exact, top-level keys; a
        string matches as it is, a number, ``True``, ``False`` or ``None``
        as JSON writes it); ``name`` (exact); ``team``, the saved team a chat
        was created from (any version); ``created_after`` and
        ``created_before`` (exclusive; an RFC 3339 string or a datetime with
        a time zone)."""
        flt = b.ChatFilter(status, metadata, name, team, created_after, created_before)
        return cast(ChatList, self._send(b.list_request(flt, limit, cursor, include_spec)))

    def iter_chats(
        self,
        *,
        status: str | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        name: str | None = None,
        team: str | None = None,
        created_after: str | datetime | None = None,
        created_before: str | datetime | None = None,
        page_size: int | None = None,
    ) -> Iterator[Chat]:
        """Every chat that the filters (as :meth:`list` takes them) let
        through, newest first, page after page."""
        cursor: str | None = None
        while True:
            page = self.list(
                status=status, metadata=metadata, name=name, team=team, created_after=created_after,
                created_before=created_before, limit=page_size, cursor=cursor,
            )
            yield from page["chats"]
            cursor = page["next_cursor"]
            if not cursor:
                return

    def messages(
        self, chat_id: str, *, after: int = 0, limit: int | None = None, wait_s: float | None = None
    ) -> MessageList:
        """The messages after seq ``after``; with ``wait_s`` a long poll."""
        return cast(MessageList, self._send(b.messages_request(chat_id, after, limit, wait_s)))

    def iter_messages(self, chat_id: str, *, after: int = 0, wait_s: float = 30) -> Iterator[Message]:
        """Every message after ``after`` as it is appended (long polls), until
        the chat ends or waits for input."""
        while True:
            page = self.messages(chat_id, after=after, wait_s=wait_s)
            yield from page["messages"]
            after = page["last_seq"]
            if not page["messages"] and page["status"] in ("completed", "failed", "cancelled", "awaiting_input"):
                return

    def events(
        self, chat_id: str, *, after: int = 0, follow: bool = False, until_run: int | None = None
    ) -> EventStream:
        """The chat's events (server-sent events) after seq ``after``, as an
        iterator that resumes a broken stream with ``Last-Event-ID`` and never
        yields an event twice.

        It ends after the terminal event of the chat's latest run (a replay
        of earlier runs goes on past theirs). ``follow=True``: it stays open
        across runs until closed. ``until_run=N``: it follows the chat until
        run N ends (or a later run, should N have been dropped), so that a
        stream opened right after :meth:`start_run` waits for the run to
        start instead of ending with the run before it."""
        return EventStream(self, chat_id, after, follow, until_run)

    def send_input(
        self,
        chat_id: str,
        request_id: str,
        *,
        content: Content | None = None,
        speaker: str | None = None,
        approvals: Sequence[Approval] | None = None,
    ) -> Chat:
        """Answers the pending input ``request_id``: a human message
        (``content``: a text, or a list of texts and images
        ``{"image": {"data": "<base64>", "media_type"?}}``, which makes it a
        MultiModalMessage), the next speaker (``speaker``) or the approvals
        of tool calls or code (``approvals``)."""
        return cast(Chat, self._send(b.input_request(chat_id, request_id, content, speaker, approvals)))

    def cancel(self, chat_id: str) -> Chat:
        """Cancels the chat: the turn in flight is cut, the chat ends
        ``cancelled``. Harmless on a chat that has ended."""
        return cast(Chat, self._send(b.cancel_request(chat_id)))

    def export_team(self, chat_id: str) -> dict[str, Any]:
        """The chat's team as AgentChat component JSON."""
        return cast("dict[str, Any]", self._send(b.team_request(chat_id)))

    def update_metadata(self, chat_id: str, metadata: Mapping[str, Any], *, include_spec: bool = False) -> Chat:
        """Merges ``metadata`` into the chat's: each key is set to its value,
        a key whose value is ``None`` is removed, the other keys are kept.
        Any chat, running or ended. Returns the chat with its new
        metadata."""
        return cast(Chat, self._send(b.patch_request(chat_id, metadata, include_spec)))

    def patch(
        self,
        chat_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        context_variables: Mapping[str, Any] | None = None,
        include_spec: bool = False,
    ) -> Chat:
        """Merges ``metadata`` and ``context_variables`` into the chat's
        (``PATCH /v1/chats/{id}``): each key is set to its value, a key whose
        value is ``None`` is removed, the other keys are kept. Context
        variables change between runs only: while a run is active, waits
        for input or is queued, :class:`RunActiveError` is raised and
        nothing changes. Returns the chat, with ``context_variables``."""
        return cast(Chat, self._send(b.patch_request(chat_id, metadata, include_spec, context_variables)))

    def erase(self, chat_id: str) -> None:
        """Erases a chat that has ended (completed, failed or cancelled):
        its log, spec, metadata, runs and webhook deliveries are removed
        for good, and the id answers :class:`NotFoundError` from then on. A
        chat that has not ended raises :class:`ChatNotEndedError` (a
        :class:`ConflictError`): cancel it first."""
        self._send(b.erase_request(chat_id))

    def deliveries(self, chat_id: str, *, after: int = 0, limit: int | None = None) -> DeliveryList:
        """The webhook deliveries of the chat's events after seq ``after``
        (one per event and endpoint: the spec's ``webhook`` and the
        tenant's), by seq and URL, each with where it stands."""
        return cast(DeliveryList, self._send(b.deliveries_request(chat_id, after, limit)))

    # Saved teams (README, "Saved teams").

    def save_team(self, name: str, team: Any) -> Team:
        """Saves ``team`` as the next version (1, 2, …) of the saved team
        ``name``: a chat spec without ``task``, an AgentChat team component
        (alone or as ``{"team": …}`` with spec options beside it) or an
        AgentChat team object. Versions are immutable; a spec equal to the
        latest version's saves nothing and returns that version. The answer
        has the version's ``spec`` and, for a component, ``warnings``."""
        return cast(Team, self._send(b.save_team_request(name, team)))

    def get_team(self, name: str, version: int | None = None) -> Team:
        """A saved team's latest version, or ``version``, with its spec; an
        unknown team or version raises :class:`NotFoundError`."""
        return cast(Team, self._send(b.get_team_request(name, version)))

    def list_teams(
        self, *, limit: int | None = None, cursor: str | None = None, include_spec: bool = False
    ) -> TeamList:
        """One page of saved teams (the latest version of each) by name;
        pass ``next_cursor`` as ``cursor`` for the next."""
        return cast(TeamList, self._send(b.list_teams_request(limit, cursor, include_spec)))

    def iter_teams(self, *, page_size: int | None = None, include_spec: bool = False) -> Iterator[Team]:
        """Every saved team (its latest version) by name, page after page."""
        cursor: str | None = None
        while True:
            page = self.list_teams(limit=page_size, cursor=cursor, include_spec=include_spec)
            yield from page["teams"]
            cursor = page["next_cursor"]
            if not cursor:
                return

    # Runs: a chat goes on (README, "Runs: a chat goes on").

    def start_run(
        self,
        chat_id: str,
        task: Task | None = None,
        *,
        if_busy: IfBusy | None = None,
        max_round: int | None = None,
        context_variables: Mapping[str, Any] | None = None,
    ) -> RunPosted:
        """Posts the chat's next run, as AgentChat's ``team.run`` called again:
        the thread and the agents' state carry over, the termination
        conditions and the turn count restart. ``task``: a text (a
        TextMessage from ``user``), a :class:`TaskMessage` (a
        ``HandoffMessage`` resumes a Swarm at its ``target``) or a list of
        them; none goes on without a new message. ``max_round``: this run's
        (default the spec's).

        While a run is active or queued, ``if_busy`` says what happens:
        ``reject`` (the default) raises :class:`RunActiveError`; ``enqueue``
        runs it after the others; ``interrupt`` drops the queued runs, ends
        the active one ``cancelled`` and runs this one next. The answer is
        the chat with ``posted_run``, the number the run got (its
        ``run.started`` and terminal events carry it): follow it with
        ``events(chat_id, after=..., until_run=posted_run)``.
        ``context_variables`` are merged into the chat's as the run starts
        (a ``None`` value removes one)."""
        return cast(RunPosted, self._send(b.run_request(chat_id, task, if_busy, max_round, context_variables)))

    def stop(self, chat_id: str) -> Chat:
        """Ends the active run after the current agent's turn, as AgentChat's
        ExternalTermination: stop reason ``external``, stop detail
        ``External termination requested``. A run waiting for input ends at
        once; with no run active the chat is returned unchanged."""
        return cast(Chat, self._send(b.stop_request(chat_id)))

    def fork(
        self,
        chat_id: str,
        *,
        at_seq: int | None = None,
        run: RunRequest | None = None,
        context_variables: Mapping[str, Any] | None = None,
    ) -> Chat:
        """A new chat of the same spec whose log is a copy of this one's up to
        ``at_seq`` (a turn's or a run's end, else :class:`ValidationError`
        with the path ``/at_seq``; default the last event), with
        ``forked_from`` set; with ``run`` (``{"task", "max_round", ...}`` as
        :meth:`start_run` takes them), that run starts at once. The source
        chat does not change."""
        return cast(Chat, self._send(b.fork_request(chat_id, at_seq, run, context_variables)))


class EventStream(Iterator[Event]):
    """The events of one chat; see :meth:`Client.events`. ``last_event_id``
    is the seq of the last event yielded: where a new stream would resume."""

    def __init__(self, client: Client, chat_id: str, after: int, follow: bool, until_run: int | None) -> None:
        self._client = client
        self._path = b.chat_path(chat_id, "/events")
        self._state = ResumeState(last_seq=after, follow=follow, until_run=until_run)
        self._gen = self._run()
        #: How many times the stream was resumed after a break.
        self.reconnects = 0

    @property
    def last_event_id(self) -> int:
        return self._state.last_seq

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        return next(self._gen)

    def close(self) -> None:
        """Closes the connection."""
        self._gen.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self) -> Generator[Event, None, None]:
        cfg, http, state = self._client._cfg, self._client._http, self._state
        decoder = SSEDecoder()
        failures = 0
        while not state.done:
            retry_after: float | None = None
            problem: Exception | None = None
            headers = cfg.headers()
            headers["Accept"] = "text/event-stream"
            headers["Last-Event-ID"] = str(state.last_seq)
            try:
                with http.stream(
                    "GET", cfg.base_url + self._path, params=b.events_params(state.follows),
                    headers=headers, timeout=cfg.stream_timeout,
                ) as resp:
                    if resp.status_code == 204:
                        return
                    if resp.status_code >= 400:
                        err = error_from_response(resp.status_code, resp.headers, resp.read())
                        if resp.status_code not in b.RETRY_STATUSES:
                            raise err
                        problem, retry_after = err, err.retry_after
                    else:
                        decoder.reset()
                        for line in resp.iter_lines():
                            ev = decoder.decode(line.rstrip("\r\n"))
                            if ev is not None and state.accept(ev):
                                failures = 0
                                yield ev
                                if state.done:
                                    return
                        if state.ended_cleanly():
                            return
                        problem = APIConnectionError("the server ended the stream before its end")
            except httpx.TransportError as e:
                problem = e
            failures += 1
            if cfg.max_reconnects is not None and failures > cfg.max_reconnects:
                raise APIConnectionError(
                    f"event stream of {self._path} broke {failures} times in a row: {problem}"
                ) from problem
            self.reconnects += 1
            time.sleep(b.reconnect_delay(cfg.reconnect_delay, decoder.retry_ms, retry_after))
