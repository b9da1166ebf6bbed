"""The runs of a team on agentd, without AgentChat: the chat that a team's
runs continue, how each run starts, and the loop that reads a run's events,
answers its input requests and translates its messages.

:class:`agentd.autogen.RemoteTeam` wraps it in AgentChat's interface (its
objects, its cancellation token); tests drive it directly against recorded
AgentChat runs without AgentChat installed.
"""

from __future__ import annotations

from typing import Any, AsyncGenerator, Awaitable, Callable, Mapping

from ._agentchat import RunEnd, Translator, structured_types, team_facts
from ._async_client import AsyncClient
from ._sse import Event
from ._types import Task

#: Answers an input request (the data of an ``input.requested`` event).
Answer = Callable[[Mapping[str, Any]], Awaitable[None]]
#: Awaits the next event of a stream; RemoteTeam's links it to a
#: cancellation token.
Step = Callable[[Awaitable[Event]], Awaitable[Event]]


def first_task(task: Task | None) -> Task:
    """The task that creates the chat (its first run): any task but none,
    since a chat starts with one."""
    if task is None:
        raise ValueError("the first run of a team on agentd needs a task (later runs may go on without one)")
    return task


async def _next(aw: Awaitable[Event]) -> Event:
    return await aw


class TeamRuns:
    """A team's runs on agentd: the first creates a chat from the team's
    component JSON, each later one continues it (``POST /runs``), as
    AgentChat's ``run`` called again continues a team, until :meth:`reset`.
    ``name`` and ``metadata`` label the chat."""

    def __init__(
        self, component: Mapping[str, Any], *, name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> None:
        self.component = dict(component)
        self.name = name
        self.metadata = dict(metadata) if metadata is not None else None
        self.streaming, self.handoffs = team_facts(self.component)
        #: The structured-output agents' types.
        self.structured = structured_types(self.component)
        #: The chat the runs continue (None before the first run).
        self.chat_id: str | None = None
        #: The seq of the last event read: later runs' streams start after it.
        self.last_seq = 0
        #: How the last run ended (None while it runs).
        self.end: RunEnd | None = None

    def reset(self) -> None:
        """Forgets the chat: the next run starts a new one."""
        self.chat_id, self.last_seq, self.end = None, 0, None

    async def start(self, client: AsyncClient, task: Task | None) -> int:
        """Creates the chat (first run) or posts its next run; returns the
        run's number. A run posted while another is active raises
        :class:`agentd.RunActiveError`, as AgentChat refuses to run a team
        that is running."""
        if self.chat_id is None:
            options: dict[str, Any] = {}
            if self.name is not None:
                options["name"] = self.name
            if self.metadata is not None:
                options["metadata"] = self.metadata
            chat = await client.create_from_team(self.component, first_task(task), **options)
            self.chat_id, self.last_seq = chat["id"], 0
            return int(chat.get("run", 1))
        posted = await client.start_run(self.chat_id, task)
        return posted["posted_run"]

    async def run(
        self,
        client: AsyncClient,
        task: Task | None,
        *,
        answer: Answer,
        output_task_messages: bool = True,
        step: Step | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Starts a run and yields its AgentChat messages (as dicts, see
        :class:`Translator`) as they happen: from its ``run.started`` (its
        task messages) to its terminal event, after which :attr:`end` says
        how it ended. Input requests of the run are answered with
        ``answer``."""
        self.end = None
        run = await self.start(client, task)
        assert self.chat_id is not None
        translator = Translator(self.streaming, self.handoffs, output_task_messages, run=run,
                                structured=self.structured)
        stream = client.events(self.chat_id, after=self.last_seq, until_run=run)
        wait = step or _next
        try:
            while translator.end is None:
                try:
                    ev = await wait(stream.__anext__())
                except StopAsyncIteration:
                    break
                if ev.id is not None:
                    self.last_seq = ev.id
                in_run = translator.in_run
                for d in translator.feed(ev):
                    yield d
                if ev.event == "input.requested" and in_run and isinstance(ev.data, Mapping):
                    await answer(ev.data)
        finally:
            await stream.aclose()
        self.end = translator.end
        if self.end is None:
            raise RuntimeError(f"the event stream of chat {self.chat_id} ended before run {run} did")
