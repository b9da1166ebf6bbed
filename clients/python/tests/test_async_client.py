"""The asyncio client against the real agentd binary: every call."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Awaitable, Callable

import pytest

import agentd
import specs
from support import Agentd, Scripted


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


def test_runs_stop_fork_and_follow(scripted: Callable[..., Scripted]) -> None:
    # Run 1's first turn waits for the test.
    sc = scripted(["r1", "r2", "r3", "r4"], gated=(1,))

    async def body(c: agentd.AsyncClient) -> None:
        chat = await c.create(specs.model_agent(max_round=5))
        cid = chat["id"]
        with pytest.raises(agentd.RunActiveError) as busy:
            await c.start_run(cid, "now")
        assert busy.value.run == 1
        posted = await c.start_run(cid, "later", if_busy="enqueue", max_round=1)
        assert posted["posted_run"] == 2 and posted["queued_runs"] == 1
        # Run 1 has no max_round of its own: stop it in its first turn.
        follow = c.events(cid, follow=True)
        seen: list[agentd.Event] = []
        async for ev in follow:
            seen.append(ev)
            if ev.event == "speaker.selected" and ev.data["turn"] == 1:
                assert (await c.stop(cid))["status"] == "running"
                sc.gates[1].set()
            if ev.terminal and ev.run == 2:
                break
        await follow.aclose()
        texts = [(e.event, e.data.get("name"), e.data.get("content"), e.data.get("stop_detail")) for e in seen
                 if e.event in ("message", "chat.completed")]
        assert texts == [
            ("message", "user", "go", None), ("message", "a", "r1", None),
            ("chat.completed", None, None, "External termination requested"),
            ("message", "user", "later", None), ("message", "a", "r2", None),
            ("chat.completed", None, None, "Maximum number of turns 1 reached."),
        ]
        # A fork at the end of run 1, with a run of its own.
        end1 = next(e.id for e in seen if e.terminal)
        assert end1 is not None
        fork = await c.fork(cid, at_seq=end1, run={"task": "forked", "max_round": 1})
        assert fork["forked_from"] == {"chat_id": cid, "seq": end1}
        forked = [e async for e in c.events(fork["id"], until_run=2)]
        copied = [e for e in seen if e.id is not None and e.id <= end1]
        assert forked[:len(copied)] == copied
        assert [e.data["content"] for e in forked[len(copied):] if e.event == "message"] == ["forked", "r3"]
        # The source goes on from its own end.
        await c.start_run(cid, max_round=1)
        rest = [e async for e in c.events(cid, after=seen[-1].id or 0, until_run=3)]
        assert [e.data["content"] for e in rest if e.event == "message"] == ["r4"]

    run(sc.server, body)
