"""The asyncio client: the same operations as :class:`agentd.Client`."""

from __future__ import annotations

import asyncio
from datetime import datetime
from types import TracebackType
from typing import Any, AsyncGenerator, AsyncIterator, Mapping, Sequence, cast

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


class AsyncClient:
    """The asyncio twin of :class:`agentd.Client`: the same arguments, the
    same methods as coroutines, and :meth:`events` as an async iterator."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        stream_read_timeout: float | None = None,
        reconnect_delay: float | None = None,
        max_reconnects: int | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._cfg = b.ClientConfig(base_url, api_key, timeout, stream_read_timeout, reconnect_delay, max_reconnects)
        self._own_http = http_client is None
        self._http = http_client or httpx.AsyncClient()

    @classmethod
    def _with_config(cls, cfg: b.ClientConfig) -> AsyncClient:
        """A new client with another client's settings."""
        c = cls()
        c._cfg = cfg
        return c

    @property
    def base_url(self) -> str:
        """The server's URL."""
        return self._cfg.base_url

    async def aclose(self) -> None:
        """Closes the connections (not an ``http_client`` given by the caller)."""
        if self._own_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(self, req: b.Request) -> Any:
        headers = self._cfg.headers()
        headers.update(req.headers)
        try:
            resp = await self._http.request(
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

    async def create(
        self,
        spec: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
        include_spec: bool = False,
    ) -> Chat:
        """See :meth:`agentd.Client.create`."""
        return cast(Chat, await self._send(b.create_request(spec, idempotency_key, wait_s, include_spec)))

    async def create_from_team(
        self,
        team: Any,
        task: Task,
        *,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
        include_spec: bool = False,
        **options: Any,
    ) -> Chat:
        """See :meth:`agentd.Client.create_from_team`."""
        return await self.create(
            b.team_spec(task, team, options),
            idempotency_key=idempotency_key,
            wait_s=wait_s,
            include_spec=include_spec,
        )

    async def create_from_saved_team(
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
        """See :meth:`agentd.Client.create_from_saved_team`."""
        options = {"name": name, "metadata": metadata, "max_round": max_round, "webhook": webhook}
        return await self.create(
            b.team_ref_spec(team_ref, version, task, options),
            idempotency_key=idempotency_key,
            wait_s=wait_s,
            include_spec=include_spec,
        )

    async def get(self, chat_id: str, *, include_spec: bool = False) -> Chat:
        """See :meth:`agentd.Client.get`."""
        return cast(Chat, await self._send(b.get_request(chat_id, include_spec)))

    async def list(
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
        """See :meth:`agentd.Client.list`."""
        flt = b.ChatFilter(status, metadata, name, team, created_after, created_before)
        return cast(ChatList, await self._send(b.list_request(flt, limit, cursor, include_spec)))

    async def iter_chats(
        self,
        *,
        status: str | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        name: str | None = None,
        team: str | None = None,
        created_after: str | datetime | None = None,
        created_before: str | datetime | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Chat]:
        """See :meth:`agentd.Client.iter_chats`."""
        cursor: str | None = None
        while True:
            page = await self.list(
                status=status, metadata=metadata, name=name, team=team, created_after=created_after,
                created_before=created_before, limit=page_size, cursor=cursor,
            )
            for c in page["chats"]:
                yield c
            cursor = page["next_cursor"]
            if not cursor:
                return

    async def messages(
        self, chat_id: str, *, after: int = 0, limit: int | None = None, wait_s: float | None = None
    ) -> MessageList:
        """See :meth:`agentd.Client.messages`."""
        return cast(MessageList, await self._send(b.messages_request(chat_id, after, limit, wait_s)))

    async def iter_messages(self, chat_id: str, *, after: int = 0, wait_s: float = 30) -> AsyncIterator[Message]:
        """See :meth:`agentd.Client.iter_messages`."""
        while True:
            page = await self.messages(chat_id, after=after, wait_s=wait_s)
            for m in page["messages"]:
                yield m
            after = page["last_seq"]
            if not page["messages"] and page["status"] in ("completed", "failed", "cancelled", "awaiting_input"):
                return

    def events(
        self, chat_id: str, *, after: int = 0, follow: bool = False, until_run: int | None = None
    ) -> AsyncEventStream:
        """See :meth:`agentd.Client.events`; an async iterator."""
        return AsyncEventStream(self, chat_id, after, follow, until_run)

    async def send_input(
        self,
        chat_id: str,
        request_id: str,
        *,
        content: Content | None = None,
        speaker: str | None = None,
        approvals: Sequence[Approval] | None = None,
    ) -> Chat:
        """See :meth:`agentd.Client.send_input`."""
        return cast(Chat, await self._send(b.input_request(chat_id, request_id, content, speaker, approvals)))

    async def cancel(self, chat_id: str) -> Chat:
        """See :meth:`agentd.Client.cancel`."""
        return cast(Chat, await self._send(b.cancel_request(chat_id)))

    async def export_team(self, chat_id: str) -> dict[str, Any]:
        """See :meth:`agentd.Client.export_team`."""
        return cast("dict[str, Any]", await self._send(b.team_request(chat_id)))

    async def update_metadata(
        self, chat_id: str, metadata: Mapping[str, Any], *, include_spec: bool = False
    ) -> Chat:
        """See :meth:`agentd.Client.update_metadata`."""
        return cast(Chat, await self._send(b.patch_request(chat_id, metadata, include_spec)))

    async def patch(
        self,
        chat_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        context_variables: Mapping[str, Any] | None = None,
        include_spec: bool = False,
    ) -> Chat:
        """See :meth:`agentd.Client.patch`."""
        return cast(Chat, await self._send(b.patch_request(chat_id, metadata, include_spec, context_variables)))

    async def erase(self, chat_id: str) -> None:
        """See :meth:`agentd.Client.erase`."""
        await self._send(b.erase_request(chat_id))

    async def deliveries(self, chat_id: str, *, after: int = 0, limit: int | None = None) -> DeliveryList:
        """See :meth:`agentd.Client.deliveries`."""
        return cast(DeliveryList, await self._send(b.deliveries_request(chat_id, after, limit)))

    async def save_team(self, name: str, team: Any) -> Team:
        """See :meth:`agentd.Client.save_team`."""
        return cast(Team, await self._send(b.save_team_request(name, team)))

    async def get_team(self, name: str, version: int | None = None) -> Team:
        """See :meth:`agentd.Client.get_team`."""
        return cast(Team, await self._send(b.get_team_request(name, version)))

    async def list_teams(
        self, *, limit: int | None = None, cursor: str | None = None, include_spec: bool = False
    ) -> TeamList:
        """See :meth:`agentd.Client.list_teams`."""
        return cast(TeamList, await self._send(b.list_teams_request(limit, cursor, include_spec)))

    async def iter_teams(
        self, *, page_size: int | None = None, include_spec: bool = False
    ) -> AsyncIterator[Team]:
        """See :meth:`agentd.Client.iter_teams`."""
        cursor: str | None = None
        while True:
            page = await self.list_teams(limit=page_size, cursor=cursor, include_spec=include_spec)
            for t in page["teams"]:
                yield t
            cursor = page["next_cursor"]
            if not cursor:
                return

    async def start_run(
        self,
        chat_id: str,
        task: Task | None = None,
        *,
        if_busy: IfBusy | None = None,
        max_round: int | None = None,
        context_variables: Mapping[str, Any] | None = None,
    ) -> RunPosted:
        """See :meth:`agentd.Client.start_run`."""
        return cast(RunPosted, await self._send(b.run_request(chat_id, task, if_busy, max_round, context_variables)))

    async def stop(self, chat_id: str) -> Chat:
        """See :meth:`agentd.Client.stop`."""
        return cast(Chat, await self._send(b.stop_request(chat_id)))

    async def fork(
        self,
        chat_id: str,
        *,
        at_seq: int | None = None,
        run: RunRequest | None = None,
        context_variables: Mapping[str, Any] | None = None,
    ) -> Chat:
        """See :meth:`agentd.Client.fork`."""
        return cast(Chat, await self._send(b.fork_request(chat_id, at_seq, run, context_variables)))


class AsyncEventStream(AsyncIterator[Event]):
    """The events of one chat; see :meth:`agentd.Client.events`."""

    def __init__(
        self, client: AsyncClient, chat_id: str, after: int, follow: bool, until_run: int | None
    ) -> None:
        self._client = client
        self._path = b.chat_path(chat_id, "/events")
        self._state = ResumeState(last_seq=after, follow=follow, until_run=until_run)
        self._gen = self._run()
        #: How many times the stream was resumed after a break.
        self.reconnects = 0

    @property
    def last_event_id(self) -> int:
        return self._state.last_seq

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Event:
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        """Closes the connection."""
        await self._gen.aclose()

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _run(self) -> AsyncGenerator[Event, None]:
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
                async with http.stream(
                    "GET", cfg.base_url + self._path, params=b.events_params(state.follows),
                    headers=headers, timeout=cfg.stream_timeout,
                ) as resp:
                    if resp.status_code == 204:
                        return
                    if resp.status_code >= 400:
                        err = error_from_response(resp.status_code, resp.headers, await resp.aread())
                        if resp.status_code not in b.RETRY_STATUSES:
                            raise err
                        problem, retry_after = err, err.retry_after
                    else:
                        decoder.reset()
                        async for line in resp.aiter_lines():
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
            await asyncio.sleep(b.reconnect_delay(cfg.reconnect_delay, decoder.retry_ms, retry_after))
