"""AgentChat teams that run on agentd, behind AgentChat's own team interface.

::

    from autogen_agentchat.ui import Console
    from agentd.autogen import RemoteTeam

    remote = RemoteTeam(team)              # an AgentChat team (or its component JSON)
    await Console(remote.run_stream(task="Write a haiku about logs."))
    await Console(remote.run_stream(task="Now one about metrics."))   # the same chat goes on

:class:`RemoteTeam` sends the team's component JSON to agentd, which runs it
durably (the team survives restarts of the server and of this process), and
yields what AgentChat's ``run_stream`` yields: ``TextMessage``,
``ThoughtEvent``, ``ToolCallRequestEvent``, ``ToolCallExecutionEvent``,
``ToolCallSummaryMessage``, ``HandoffMessage``,
``ModelClientStreamingChunkEvent`` (for agents with ``model_client_stream``),
``UserInputRequestedEvent`` … and the ``TaskResult`` last. A
structured-output agent's replies are ``StructuredMessage[T]`` whose
``content`` is an instance of the agent's ``output_content_type`` ``T``.

Importing this module imports AgentChat (``autogen-agentchat`` 0.7.5);
``import agentd`` alone does not.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, AsyncGenerator, Awaitable, Callable, Mapping, Sequence, Union, cast

from autogen_agentchat import messages as _messages
from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import (
    BaseAgentEvent,
    BaseChatMessage,
    HandoffMessage,
    MultiModalMessage,
    StructuredMessage,
    StructuredMessageFactory,
    TextMessage,
)
from autogen_core import CancellationToken
from pydantic import BaseModel, ConfigDict, create_model

from ._async_client import AsyncClient
from ._agentchat import structured_types
from ._base import team_component
from ._client import Client
from ._errors import RunFailedError
from ._remote import TeamRuns
from ._sse import Event
from ._types import Approval, PendingInput, Task, TaskMessage

#: What a human is asked for, as AgentChat's UserProxyAgent asks it.
INPUT_PROMPT = "Enter your response: "

InputFunc = Union[Callable[[str], str], Callable[[str, Union[CancellationToken, None]], Awaitable[str]]]
ApprovalFunc = Callable[[PendingInput], Union[Sequence[Approval], Awaitable[Sequence[Approval]]]]
TaskType = Union[str, BaseChatMessage, Sequence[BaseChatMessage], None]


#: The content of a StructuredMessage from an agent whose type is unknown
#: (not in the team): the object's fields as they are.
_AnyContent: type[BaseModel] = create_model("StructuredContent", __config__=ConfigDict(extra="allow"))


def content_types(team: Any, component: Mapping[str, Any]) -> dict[str, type[BaseModel]]:
    """Each structured-output agent's content type: the agent's own
    ``output_content_type`` where the team object is at hand, else the model
    that AgentChat's ``StructuredMessageFactory`` makes from the component's
    JSON Schema (what ``AssistantAgent.load_component`` gives the agent).
    Any other agent's content is a model that keeps the object's fields as
    they are."""
    out: dict[str, type[BaseModel]] = {}
    for name, st in structured_types(component).items():
        if st.json_schema is None:
            continue
        try:
            factory = StructuredMessageFactory(json_schema=dict(st.json_schema), content_model_name=st.name)
        except Exception:  # a schema AgentChat cannot make a model of: the object as it is
            continue
        out[name] = factory.ContentModel
    for agent in getattr(team, "_participants", None) or []:
        own = getattr(agent, "_output_content_type", None)
        if isinstance(own, type) and issubclass(own, BaseModel) and getattr(agent, "name", None):
            out[agent.name] = own
    return out


def _message(d: dict[str, Any], types: Mapping[str, type[BaseModel]] | None = None) -> BaseAgentEvent | BaseChatMessage:
    """The AgentChat object for a message dict of the translator; a
    StructuredMessage's content is of its agent's type in ``types``."""
    if d["type"].startswith("StructuredMessage"):
        content_type = (types or {}).get(d["source"], _AnyContent)
        message: BaseChatMessage = StructuredMessage[content_type].model_validate(
            {k: v for k, v in d.items() if k != "type"})
        return message
    cls = getattr(_messages, d["type"], None)
    if cls is None:
        raise ValueError(f"agentd sent a message of type {d['type']!r}, which AgentChat 0.7.5 does not have")
    obj: BaseAgentEvent | BaseChatMessage = cls.model_validate(d)
    return obj


def _task_message(task: BaseChatMessage) -> TaskMessage:
    """A task message as agentd takes it."""
    if isinstance(task, HandoffMessage):
        return {"type": "HandoffMessage", "source": task.source, "target": task.target, "content": task.content}
    if isinstance(task, TextMessage):
        return {"type": "TextMessage", "source": task.source, "content": task.content}
    if isinstance(task, MultiModalMessage):
        # An image as AgentChat's Image dumps itself: base64 PNG.
        parts: list[str | dict[str, Any]] = [
            c if isinstance(c, str) else {"image": {"data": c.to_base64(), "media_type": "image/png"}}
            for c in task.content
        ]
        return {"type": "MultiModalMessage", "source": task.source, "content": parts}
    raise ValueError(
        f"a task of type {type(task).__name__} cannot run on agentd (TextMessage, MultiModalMessage or HandoffMessage)"
    )


def _task(task: TaskType) -> Task | None:
    """An AgentChat task as agentd takes it."""
    if task is None or isinstance(task, str):
        return task
    if isinstance(task, BaseChatMessage):
        return _task_message(task)
    return [_task_message(t) for t in task]


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

    The first run creates a chat on agentd; each later run continues it
    (POST /v1/chats/{id}/runs) with its task — a text, a ``TextMessage``, a
    ``HandoffMessage`` (a Swarm that handed off to the user goes on with
    its ``target``), a list of them, or none — as AgentChat's ``run`` called
    again continues a team, until :meth:`reset`. Each run's ``TaskResult``
    holds that run's messages (its task's and what followed) and its stop
    reason. A run posted while the chat runs one that another client
    started raises :class:`agentd.RunActiveError`. Cancelling the
    ``CancellationToken`` of a run cancels the run on the server and raises
    ``asyncio.CancelledError``, as AgentChat does; a run that fails on the
    server raises :class:`agentd.RunFailedError` (a ``RuntimeError``).
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
        component = team_component(team)
        self._client = client
        config = component.get("config")
        self.name: str = name or (config.get("name") if isinstance(config, Mapping) else None) or "RemoteTeam"
        self.description: str = str(component.get("description") or "")
        self._runs = TeamRuns(component, name=name, metadata=metadata)
        self._content_types = content_types(team, component)
        self._input_func = input_func
        self._approval_func = approval_func
        self._running = False

    @property
    def chat_id(self) -> str | None:
        """The chat on agentd that the runs so far made (None before the first)."""
        return self._runs.chat_id

    @property
    def component(self) -> dict[str, Any]:
        """The team's component JSON, as sent to agentd."""
        return self._runs.component

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
        happen, then the ``TaskResult``, as AgentChat's ``Team.run_stream``.
        The first run creates the chat; each later one continues it (its
        ``TaskResult`` holds that run's messages: its task's and what
        followed)."""
        if self._running:
            raise ValueError("The team is already running, it cannot run again until it is stopped.")
        agentd_task = _task(task)
        self._running = True
        client, own = self._open_client()
        try:

            async def answer(pending: Mapping[str, Any]) -> None:
                await self._answer(client, pending, cancellation_token)

            async def step(aw: Awaitable[Event]) -> Event:
                fut = asyncio.ensure_future(aw)
                if cancellation_token is not None:
                    cancellation_token.link_future(fut)
                try:
                    return await fut
                except asyncio.CancelledError:
                    if cancellation_token is not None and cancellation_token.is_cancelled() and self.chat_id:
                        await asyncio.shield(client.cancel(self.chat_id))
                    raise

            output: list[BaseAgentEvent | BaseChatMessage] = []
            async for d in self._runs.run(
                client, agentd_task, answer=answer, output_task_messages=output_task_messages, step=step
            ):
                msg = _message(d, self._content_types)
                yield msg
                if not isinstance(msg, _messages.ModelClientStreamingChunkEvent):
                    output.append(msg)
            end = self._runs.end
            assert end is not None and self.chat_id is not None
            if end.status == "failed":
                raise RunFailedError(self.chat_id, end.error or end.stop_reason or "the run failed")
            if end.status == "cancelled":
                raise asyncio.CancelledError(f"chat {self.chat_id} was cancelled")
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

    async def _answer(self, client: AsyncClient, pending: Mapping[str, Any], token: CancellationToken | None) -> None:
        """Answers a pending input request: a human message through
        ``input_func``, approvals through ``approval_func``."""
        assert self.chat_id is not None
        kind = pending.get("kind")
        request_id = str(pending.get("request_id", ""))
        if kind == "message":
            func = self._input_func
            if func is None:
                answer = await asyncio.to_thread(input, INPUT_PROMPT)
            else:
                params = inspect.signature(func).parameters
                out = func(INPUT_PROMPT, token) if len(params) >= 2 else func(INPUT_PROMPT)  # type: ignore[call-arg]
                answer = await out if inspect.isawaitable(out) else out
            await client.send_input(self.chat_id, request_id, content=str(answer))
        elif kind == "approval" and self._approval_func is not None:
            got = self._approval_func(cast(PendingInput, pending))
            approvals = await got if inspect.isawaitable(got) else got
            await client.send_input(self.chat_id, request_id, approvals=list(approvals))
        else:
            raise RuntimeError(
                f"chat {self.chat_id} waits for input of kind {kind!r} that this RemoteTeam cannot give "
                f"(pass approval_func for approvals); answer it with agentd.Client.send_input"
            )

    async def reset(self) -> None:
        """Forgets the chat: the next run starts a new one (the old chat stays
        on the server, with its log)."""
        if self._running:
            raise RuntimeError("The group chat is currently running. It must be stopped before it can be reset.")
        self._runs.reset()

    async def save_state(self) -> Mapping[str, Any]:
        """The team's state: which chat on agentd it continues. The
        conversation itself is in the chat's log on the server."""
        return {"type": "RemoteTeamState", "version": "1.0.0", "chat_id": self._runs.chat_id,
                "last_seq": self._runs.last_seq}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Continues the chat a :meth:`save_state` names."""
        self._runs.reset()
        chat_id = state.get("chat_id")
        self._runs.chat_id = str(chat_id) if chat_id else None
        self._runs.last_seq = int(state.get("last_seq") or 0)
