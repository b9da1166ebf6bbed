"""A stream cut in the middle (by a TCP proxy that drops the connection
after a few hundred bytes, wherever they end) is resumed with Last-Event-ID:
every event arrives once, in order, as on an unbroken stream."""

from __future__ import annotations

import asyncio

import agentd
import specs
from support import Agentd, CutProxy


def reference(server: Agentd, chat_id: str) -> list[agentd.Event]:
    with agentd.Client(server.url) as c:
        return list(c.events(chat_id))


def test_sync_stream_survives_cuts(server: Agentd) -> None:
    proxy = CutProxy(server.address, cut_after=700)
    try:
        with agentd.Client(server.url) as direct:
            chat = direct.create(specs.debate(cycles=4, delay_ms=40))
        with agentd.Client(proxy.url, reconnect_delay=0.02, max_reconnects=5) as c:
            stream = c.events(chat["id"])
            got = list(stream)
        want = reference(server, chat["id"])
        assert want[-1].event == "chat.completed" and len(want) > 20
        assert [e.id for e in got] == [e.id for e in want]
        assert got == want
        assert proxy.cuts_made >= 5 and stream.reconnects >= 5, (proxy.cuts_made, stream.reconnects)
    finally:
        proxy.close()


def test_async_stream_survives_cuts(server: Agentd) -> None:
    proxy = CutProxy(server.address, cut_after=650)

    async def main() -> tuple[str, list[agentd.Event], int]:
        async with agentd.AsyncClient(server.url) as direct:
            chat = await direct.create(specs.debate(cycles=4, delay_ms=40))
        async with agentd.AsyncClient(proxy.url, reconnect_delay=0.02, max_reconnects=5) as c:
            stream = c.events(chat["id"])
            got = [e async for e in stream]
            return chat["id"], got, stream.reconnects

    try:
        chat_id, got, reconnects = asyncio.run(main())
        want = reference(server, chat_id)
        assert got == want
        assert proxy.cuts_made >= 5 and reconnects >= 5
    finally:
        proxy.close()


def test_resume_from_a_later_stream(server: Agentd) -> None:
    """A stream closed by the caller resumes where it stopped when a new one
    starts from its last_event_id, through a cut as well."""
    proxy = CutProxy(server.address, cut_after=700, cuts=2)
    try:
        with agentd.Client(server.url) as direct:
            chat = direct.create(specs.debate(cycles=2, delay_ms=20))
        with agentd.Client(proxy.url, reconnect_delay=0.02) as c:
            first = c.events(chat["id"])
            head = [next(first) for _ in range(5)]
            first.close()
            tail = list(c.events(chat["id"], after=first.last_event_id))
        assert head + tail == reference(server, chat["id"])
        assert proxy.cuts_made == 2
    finally:
        proxy.close()
