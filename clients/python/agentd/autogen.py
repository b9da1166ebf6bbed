"""AgentChat teams that run on agentd, behind AgentChat's own team interface.

::

    from autogen_agentchat.ui import Console
    from agentd.autogen import RemoteTeam

    remote = RemoteTeam(team)              # an AgentChat team (or its component JSON)
    await Console(remote.run_stream(task="Write a haiku about logs."))

:class:`RemoteTeam` sends the team's component JSON to agentd, which runs it
durably (the team survives restarts of the server and of this process), and
yields what AgentChat's ``run_stream`` yields: ``TextMessage``,
``ThoughtEvent``, ``ToolCallRequestEvent``, ``ToolCallExecutionEvent``,
``ToolCallSummaryMessage``, ``HandoffMessage``,
``ModelClientStreamingChunkEvent`` (for agents with ``model_client_stream``),
``UserInputRequestedEvent`` … and the ``TaskResult`` last.

Importing this module imports AgentChat (``autogen-agentchat`` 0.7.5);
``import agentd`` alone does not.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, AsyncGenerator, Awaitable, Callable, Mapping, Sequence, Union

from autogen_agentchat import messages as _messages
from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, HandoffMessage, TextMessage
from autogen_core import CancellationToken

from ._agentchat import Translator, team_facts
from ._async_client import AsyncClient
from ._base import team_component
from ._client import Client
from ._errors import APIError, RunFailedError
from ._types import Approval, PendingInput

#: What a human is asked for, as AgentChat's UserProxyAgent asks it.
INPUT_PROMPT = "Enter your response: "

InputFunc = Union[Callable[[str], str], Callable[[str, Union[CancellationToken, None]], Awaitable[str]]]
ApprovalFunc = Callable[[PendingInput], Union[Sequence[Approval], Awaitable[Sequence[Approval]]]]
TaskType = Union[str, BaseChatMessage, Sequence[BaseChatMessage], None]


def _message(d: dict[str, Any]) -> BaseAgentEvent | BaseChatMessage:
    """The AgentChat object for a message dict of the translator."""
    cls = getattr(_messages, d["type"], None)
    if cls is None:
        raise ValueError(f"agentd sent a message of type {d['type']!r}, which AgentChat 0.7.5 does not have")
    obj: BaseAgentEvent | BaseChatMessage = cls.model_validate(d)
    return obj


def _task_body(task: BaseChatMessage) -> dict[str, Any]:
    """A task message as POST /runs takes it."""
    if isinstance(task, HandoffMessage):
        return {"type": "HandoffMessage", "source": task.source, "target": task.target, "content": task.content}
    if isinstance(task, TextMessage):
        return {"type": "TextMessage", "source": task.source, "content": task.content}
    raise ValueError(f"a task of type {type(task).__name__} cannot run on agentd (TextMessage or HandoffMessage)")


class RemoteTeam:
    """An AgentChat team that runs on agentd.

    ``team`` is an AgentChat team (``RoundRobinGroupChat``,
    ``SelectorGroupChat``, ``Swarm`` …), its ``ComponentModel`` or its
    component JSON as a dict. ``client`` is an :class:`agentd.AsyncClient` or
    :class:`agentd.Client` (default: one from ``AGENTD_URL`` and
    ``AGENTD_API_KEY``); with a sync client or none, each run opens and closes
    its own connections, so that runs may use different event loops.
    ``name`` and ``metadata`` label the chat on the server.

    ``input_func`` answers a ``UserProxyAgent``'s request for a human
    message (default: ``input()`` in a thread, as AgentChat's default);
    ``approval_func`` answers an approval request (the chat's
    ``pending_input``) with the approvals of its tool calls or code.

    The first run creates a chat on agentd; later runs continue it (POST
    /v1/chats/{id}/runs), as AgentChat's ``run`` continues a team, until
    :meth:`reset`. Cancelling the ``CancellationToken`` of a run cancels the
    chat on the server and raises ``asyncio.CancelledError``, as AgentChat
    does; a run that fails on the server raises
    :class:`agentd.RunFailedError` (a ``RuntimeError``).
    """

    component_type = "team"

    def __init__(
        self,
        team: Any,
        client: AsyncClient | Client | None = None,
        *,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        input_func: InputFunc | None = None,
        approval_func: ApprovalFunc | None = None,
    ) -> None:
        self._component = team_component(team)
        self._client = client
        config = self._component.get("config")
        self.name: str = name or (config.get("name") if isinstance(config, Mapping) else None) or "RemoteTeam"
        self.description: str = str(self._component.get("description") or "")
        self._chat_name = name
        self._metadata = dict(metadata) if metadata is not None else None
        self._input_func = input_func
        self._approval_func = approval_func
        self._streaming, self._handoffs = team_facts(self._component)
        self._chat_id: str | None = None
        self._last_seq = 0
        self._running = False

    @property
    def chat_id(self) -> str | None:
        """The chat on agentd that the runs so far made (None before the first)."""
        return self._chat_id

    @property
    def component(self) -> dict[str, Any]:
        """The team's component JSON, as sent to agentd."""
        return self._component

    async def run(
        self,
        *,
        task: TaskType = None,
        cancellation_token: CancellationToken | None = None,
        output_task_messages: bool = True,
    ) -> TaskResult:
        """Runs the team on agentd and returns the result, as AgentChat's
        ``Team.run``."""
        result: TaskResult | None = None
        async for item in self.run_stream(
            task=task, cancellation_token=cancellation_token, output_task_messages=output_task_messages
        ):
            if isinstance(item, TaskResult):
                result = item
        if result is None:
            raise RuntimeError("the run ended without a result")
        return result

    async def run_stream(
        self,
        *,
        task: TaskType = None,
        cancellation_token: CancellationToken | None = None,
        output_task_messages: bool = True,
    ) -> AsyncGenerator[BaseAgentEvent | BaseChatMessage | TaskResult, None]:
        """Runs the team on agentd and yields its messages and events as they
        happen, then the ``TaskResult``, as AgentChat's ``Team.run_stream``."""
        if self._running:
            raise ValueError("The team is already running, it cannot run again until it is stopped.")
        self._running = True
        client, own = self._open_client()
        try:
            await self._start(client, task)
            assert self._chat_id is not None
            translator = Translator(self._streaming, self._handoffs, output_task_messages)
            output: list[BaseAgentEvent | BaseChatMessage] = []
            stream = client.events(self._chat_id, after=self._last_seq)
            try:
                while translator.end is None:
                    step = asyncio.ensure_future(stream.__anext__())
                    if cancellation_token is not None:
                        cancellation_token.link_future(step)
                    try:
                        ev = await step
                    except StopAsyncIteration:
                        break
                    except asyncio.CancelledError:
                        if cancellation_token is not None and cancellation_token.is_cancelled():
                            await asyncio.shield(client.cancel(self._chat_id))
                        raise
                    if ev.id is not None:
                        self._last_seq = ev.id
                    for d in translator.feed(ev):
                        msg = _message(d)
                        yield msg
                        if not isinstance(msg, _messages.ModelClientStreamingChunkEvent):
                            output.append(msg)
                    if ev.event == "input.requested":
                        await self._answer(client, ev.data, cancellation_token)
            finally:
                await stream.aclose()
            end = translator.end
            if end is None:
                raise RuntimeError(f"the event stream of chat {self._chat_id} ended before the run did")
            if end.status == "failed":
                raise RunFailedError(self._chat_id, end.error or end.stop_reason or "the run failed")
            if end.status == "cancelled":
                raise asyncio.CancelledError(f"chat {self._chat_id} was cancelled")
            yield TaskResult(messages=output, stop_reason=end.stop_reason)
        finally:
            self._running = False
            if own:
                await client.aclose()

    def _open_client(self) -> tuple[AsyncClient, bool]:
        if isinstance(self._client, AsyncClient):
            return self._client, False
        if isinstance(self._client, Client):
            return AsyncClient._with_config(self._client._cfg), True
        return AsyncClient(), True

    async def _start(self, client: AsyncClient, task: TaskType) -> None:
        """Creates the chat (first run) or starts its next run."""
        if self._chat_id is None:
            if isinstance(task, TextMessage):
                task = task.content
            if not isinstance(task, str):
                raise ValueError("the first run of a RemoteTeam needs a task: a text or a TextMessage")
            options: dict[str, Any] = {}
            if self._chat_name is not None:
                options["name"] = self._chat_name
            if self._metadata is not None:
                options["metadata"] = self._metadata
            chat = await client.create_from_team(self._component, task, **options)
            self._chat_id, self._last_seq = chat["id"], 0
            return
        body: Any = None
        if isinstance(task, str):
            body = task
        elif isinstance(task, BaseChatMessage):
            body = _task_body(task)
        elif task is not None:
            body = [_task_body(t) for t in task]
        try:
            await client.start_run(self._chat_id, body)
        except APIError as e:
            if e.status in (404, 405) and e.type in ("urn:agentd:problem:not-found",
                                                     "urn:agentd:problem:method-not-allowed"):
                # A server without runs (before API 1.1) answers for a route it
                # does not have; the chat itself exists.
                try:
                    await client.get(self._chat_id)
                except APIError:
                    raise e from None
                raise RuntimeError(
                    "this agentd server cannot continue a chat (no POST /v1/chats/{id}/runs); "
                    "call reset() to run the team again as a new chat"
                ) from e
            raise

    async def _answer(self, client: AsyncClient, pending: Any, token: CancellationToken | None) -> None:
        """Answers a pending input request: a human message through
        ``input_func``, approvals through ``approval_func``."""
        assert self._chat_id is not None
        kind = pending.get("kind") if isinstance(pending, Mapping) else None
        request_id = str(pending.get("request_id", "")) if isinstance(pending, Mapping) else ""
        if kind == "message":
            func = self._input_func
            if func is None:
                answer = await asyncio.to_thread(input, INPUT_PROMPT)
            else:
                params = inspect.signature(func).parameters
                out = func(INPUT_PROMPT, token) if len(params) >= 2 else func(INPUT_PROMPT)  # type: ignore[call-arg]
                answer = await out if inspect.isawaitable(out) else out
            await client.send_input(self._chat_id, request_id, content=str(answer))
        elif kind == "approval" and self._approval_func is not None:
            got = self._approval_func(pending)
            approvals = await got if inspect.isawaitable(got) else got
            await client.send_input(self._chat_id, request_id, approvals=list(approvals))
        else:
            raise RuntimeError(
                f"chat {self._chat_id} waits for input of kind {kind!r} that this RemoteTeam cannot give "
                f"(pass approval_func for approvals); answer it with agentd.Client.send_input"
            )

    async def reset(self) -> None:
        """Forgets the chat: the next run starts a new one (the old chat stays
        on the server, with its log)."""
        if self._running:
            raise RuntimeError("The group chat is currently running. It must be stopped before it can be reset.")
        self._chat_id, self._last_seq = None, 0

    async def save_state(self) -> Mapping[str, Any]:
        """The team's state: which chat on agentd it continues. The
        conversation itself is in the chat's log on the server."""
        return {"type": "RemoteTeamState", "version": "1.0.0", "chat_id": self._chat_id, "last_seq": self._last_seq}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Continues the chat a :meth:`save_state` names."""
        chat_id = state.get("chat_id")
        self._chat_id = str(chat_id) if chat_id else None
        self._last_seq = int(state.get("last_seq") or 0)
