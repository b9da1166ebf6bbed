"""The asyncio client against the real agentd binary: every call."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Awaitable, Callable

import pytest

import agentd
import specs
from support import Agentd


def run(server: Agentd, body: Callable[[agentd.AsyncClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with agentd.AsyncClient(server.url, reconnect_delay=0.05) as c:
            return await body(c)

    return asyncio.run(main())


def test_create_get_list_messages_events(server: Agentd) -> None:
    async def body(c: agentd.AsyncClient) -> None:
        key = "py-async-" + uuid.uuid4().hex
        chat = await c.create(specs.debate(delay_ms=20), idempotency_key=key)
        assert (await c.create(specs.debate(delay_ms=20), idempotency_key=key))["id"] == chat["id"]
        events = [e async for e in c.events(chat["id"])]
        assert [e.id for e in events] == list(range(1, len(events) + 1))
        assert events[-1].event == "chat.completed"
        got = await c.get(chat["id"], include_spec=True)
        assert got["status"] == "completed" and got["spec"]["name"] == "debate"
        msgs = [m async for m in c.iter_messages(chat["id"], wait_s=5)]
        assert [m["name"] for m in msgs] == ["user", "pro", "con", "judge"]
        page = await c.messages(chat["id"], after=msgs[0]["seq"], limit=2)
        assert [m["name"] for m in page["messages"]] == ["pro", "con"]
        newer = await c.create(specs.debate(), wait_s=30)
        listed = await c.list(limit=1)
        assert listed["chats"][0]["id"] == newer["id"] and listed["next_cursor"]
        seen = [x["id"] async for x in c.iter_chats(status="completed", page_size=1)]
        assert chat["id"] in seen and len(seen) == len(set(seen))
        rest = [e async for e in c.events(chat["id"], after=3)]
        assert rest == events[3:]

    run(server, body)


def test_wait_input_and_cancel(server: Agentd) -> None:
    async def body(c: agentd.AsyncClient) -> None:
        chat = await c.create(specs.manual(), wait_s=10)
        assert chat["status"] == "awaiting_input" and chat["pending_input"] is not None
        rid = chat["pending_input"]["request_id"]
        await c.send_input(chat["id"], rid, speaker="fruits")
        with pytest.raises(agentd.ConflictError):
            await c.send_input(chat["id"], rid, speaker="fruits")
        slow = await c.create(specs.slow())
        stream = c.events(slow["id"])
        assert (await stream.__anext__()).event == "chat.created"
        await c.cancel(slow["id"])
        tail = [e async for e in stream]
        assert tail[-1].event == "chat.cancelled"
        assert (await c.cancel(slow["id"]))["status"] == "cancelled"

    run(server, body)


def test_team_and_errors(server: Agentd) -> None:
    async def body(c: agentd.AsyncClient) -> None:
        chat = await c.create(specs.debate(), wait_s=30)
        team = await c.export_team(chat["id"])
        again = await c.create_from_team(team, "Again?", wait_s=30)
        assert again["status"] == "completed"
        with pytest.raises(agentd.ValidationError) as e:
            await c.create({"task": "", "agents": [{"name": "1x", "type": "robot"}], "max_round": 0})
        assert {"/task", "/max_round", "/agents/0/name"} <= {p.path for p in e.value.errors}
        with pytest.raises(agentd.NotFoundError):
            await c.get(str(uuid.uuid4()))
        with pytest.raises(agentd.NotFoundError):
            [e async for e in c.events(str(uuid.uuid4()))]

    run(server, body)


def test_api_key(keyed_server: Agentd) -> None:
    async def main() -> None:
        async with agentd.AsyncClient(keyed_server.url) as anon:
            with pytest.raises(agentd.AuthenticationError):
                await anon.list()
        async with agentd.AsyncClient(keyed_server.url, api_key="py-client-key-0123456789") as c:
            await c.list()

    asyncio.run(main())
