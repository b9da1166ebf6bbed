"""The calls of an application's backend against the real agentd binary:
saved teams and the chats made from them, list filters, metadata changes,
erasure, webhook deliveries, and a human message with an image."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import threading
import time
import uuid
import zlib
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest

import agentd
import specs
from support import Agentd


def client_for(server: Agentd) -> agentd.Client:
    return agentd.Client(server.url, reconnect_delay=0.05)


def unique(prefix: str) -> str:
    """A name no other test (the server is shared) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def team_spec(**changes: Any) -> dict[str, Any]:
    """The debate spec without its task: a team."""
    spec = specs.debate()
    del spec["task"]
    spec.update(changes)
    return spec


def test_saved_teams_and_chats_from_them(server: Agentd) -> None:
    name = unique("debate")
    with client_for(server) as c:
        v1 = c.save_team(name, team_spec())
        assert (v1["name"], v1["version"]) == (name, 1) and v1["created_at"]
        assert v1.get("spec", {})["agents"][0]["name"] == "pro"
        # The same spec again saves nothing: version 1 again.
        assert c.save_team(name, team_spec())["version"] == 1
        v2 = c.save_team(name, team_spec(max_round=6, metadata={"team": "v2"}))
        assert v2["version"] == 2 and v2.get("spec", {})["max_round"] == 6

        latest = c.get_team(name)
        assert latest["version"] == 2 and latest.get("spec", {})["metadata"] == {"team": "v2"}
        first = c.get_team(name, 1)
        assert first["version"] == 1 and first.get("spec", {})["max_round"] == 4
        assert "metadata" not in first.get("spec", {})
        with pytest.raises(agentd.NotFoundError) as nf:
            c.get_team(name, 3)
        assert nf.value.type == "urn:agentd:problem:team-not-found"
        with pytest.raises(agentd.NotFoundError):
            c.get_team(unique("nobody"))

        listed = [t for t in c.iter_teams(page_size=1) if t["name"] == name]
        assert [t["version"] for t in listed] == [2] and "spec" not in listed[0]
        with_spec = [t for t in c.list_teams(limit=1000, include_spec=True)["teams"] if t["name"] == name]
        assert with_spec[0].get("spec", {})["max_round"] == 6
        other = c.save_team(name + "-b", team_spec())
        page = c.list_teams(limit=1)
        assert len(page["teams"]) == 1 and page["next_cursor"]
        names = [t["name"] for t in c.iter_teams(page_size=1)]
        assert names == sorted(names) and {name, other["name"]} <= set(names) and len(names) == len(set(names))

        # A spec with a task is no team; problems carry their paths.
        with pytest.raises(agentd.ValidationError) as bad:
            c.save_team(name, specs.debate())
        assert "/task" in [p.path for p in bad.value.errors]

        # Chats from the team: the latest version, a version, overrides.
        chat = c.create_from_saved_team(name, "Tabs or spaces?", wait_s=30, include_spec=True)
        assert chat["team"] == {"name": name, "version": 2}
        assert chat.get("spec", {})["task"] == "Tabs or spaces?" and chat["status"] == "completed"
        pinned = c.create_from_saved_team(
            f"{name}@1", "Tabs?", name=unique("pinned"), metadata={"ticket": "T-9"}, max_round=9, include_spec=True)
        assert pinned["team"] == {"name": name, "version": 1}
        assert pinned["metadata"] == {"ticket": "T-9"} and pinned.get("spec", {})["max_round"] == 9
        again = c.create_from_saved_team(name, "Tabs?", version=1)
        assert again["team"] == {"name": name, "version": 1}
        # create() takes the saved-team form as it is.
        plain = c.create({"team_ref": name, "task": "Spaces?"})
        assert plain["team"] == {"name": name, "version": 2}
        with pytest.raises(agentd.ValidationError) as unknown:
            c.create_from_saved_team(name, "x", version=9)
        assert [p.path for p in unknown.value.errors] == ["/team_ref"]
        with pytest.raises(ValueError):
            c.create_from_saved_team(f"{name}@1", "x", version=1)

        made = {chat["id"], pinned["id"], again["id"], plain["id"]}
        assert {x["id"] for x in c.iter_chats(team=name, page_size=1)} == made
        assert [x["id"] for x in c.list(team=name, metadata={"ticket": "T-9"})["chats"]] == [pinned["id"]]
        assert c.create(specs.debate())["team"] is None


def test_list_filters(server: Agentd) -> None:
    tag = unique("filters")
    with client_for(server) as c:
        made = []
        for i, meta in enumerate([
            {"tag": tag, "n": 1, "urgent": True},
            {"tag": tag, "n": 2, "urgent": False, "who": "ann"},
            {"tag": tag, "n": 3, "urgent": True, "who": "ann", "gone": None},
        ]):
            made.append(c.create(metadata_name(meta, f"{tag}-{i % 2}")))
            time.sleep(0.02)  # distinct creation times
        a, b, d = made

        def ids(**flt: Any) -> list[str]:
            return [x["id"] for x in c.iter_chats(page_size=1, **flt)]

        assert ids(metadata={"tag": tag}) == [d["id"], b["id"], a["id"]]
        assert ids(metadata={"tag": tag, "who": "ann"}) == [d["id"], b["id"]]
        assert ids(metadata={"tag": tag, "urgent": True}) == [d["id"], a["id"]]
        assert ids(metadata={"tag": tag, "n": 2}) == [b["id"]]
        assert ids(metadata={"tag": tag, "gone": None}) == [d["id"]]
        assert ids(name=f"{tag}-0") == [d["id"], a["id"]]
        assert ids(name=f"{tag}-1", metadata={"tag": tag}) == [b["id"]]
        assert ids(metadata={"tag": tag}, created_after=a["created_at"]) == [d["id"], b["id"]]
        assert ids(metadata={"tag": tag}, created_before=d["created_at"]) == [b["id"], a["id"]]
        assert ids(metadata={"tag": tag}, created_after=a["created_at"], created_before=d["created_at"]) == [b["id"]]
        later = datetime.now(timezone.utc).replace(year=datetime.now().year + 1)
        assert ids(metadata={"tag": tag}, created_after=later) == []
        assert ids(metadata={"tag": tag}, created_before=later) == [d["id"], b["id"], a["id"]]
        # The cursor of a filtered page goes on with the same filters.
        page = c.list(metadata={"tag": tag}, limit=2)
        assert [x["id"] for x in page["chats"]] == [d["id"], b["id"]] and page["next_cursor"]
        rest = c.list(metadata={"tag": tag}, limit=2, cursor=page["next_cursor"])
        assert [x["id"] for x in rest["chats"]] == [a["id"]] and rest["next_cursor"] is None

        with pytest.raises(agentd.BadRequestError) as bad:
            c.list(created_after="yesterday", team="bad name")
        assert sorted(p.path for p in bad.value.errors) == ["created_after", "team"]
        with pytest.raises(ValueError):
            c.list(created_after=datetime(2026, 1, 1))  # no time zone


def metadata_name(meta: dict[str, Any], name: str) -> dict[str, Any]:
    spec = specs.debate()
    spec["metadata"], spec["name"] = meta, name
    return spec


def test_update_metadata(server: Agentd) -> None:
    tag = unique("patch")
    with client_for(server) as c:
        chat = c.create({**specs.debate(), "metadata": {"tag": tag, "state": "new", "draft": "x"}}, wait_s=30)
        out = c.update_metadata(chat["id"], {"state": "escalated", "draft": None, "owner": {"id": 7}})
        assert out["id"] == chat["id"]
        want = {"tag": tag, "state": "escalated", "owner": {"id": 7}}
        assert out["metadata"] == want and c.get(chat["id"])["metadata"] == want
        assert [x["id"] for x in c.list(metadata={"tag": tag, "state": "escalated"})["chats"]] == [chat["id"]]
        assert c.list(metadata={"tag": tag, "state": "new"})["chats"] == []
        with_spec = c.update_metadata(chat["id"], {}, include_spec=True)
        assert with_spec["metadata"] == want and "spec" in with_spec
        with pytest.raises(agentd.NotFoundError):
            c.update_metadata(str(uuid.uuid4()), {"a": 1})
        with pytest.raises(agentd.ValidationError) as big:
            c.update_metadata(chat["id"], {"blob": "x" * 40000})
        assert big.value.errors and big.value.errors[0].path.startswith("/metadata")


def test_erase(server: Agentd) -> None:
    with client_for(server) as c:
        ended = c.create(specs.debate(), wait_s=30)
        assert ended["status"] == "completed"
        c.erase(ended["id"])
        calls: list[Callable[[], object]] = [lambda: c.get(ended["id"]), lambda: c.messages(ended["id"]),
                                             lambda: list(c.events(ended["id"])), lambda: c.erase(ended["id"])]
        for call in calls:
            with pytest.raises(agentd.NotFoundError):
                call()

        running = c.create(specs.slow())
        with pytest.raises(agentd.ChatNotEndedError) as busy:
            c.erase(running["id"])
        err = busy.value
        assert isinstance(err, agentd.ConflictError) and err.status == 409
        assert err.type == "urn:agentd:problem:chat-not-ended" and err.request_id
        assert c.get(running["id"])["id"] == running["id"]  # still there
        c.cancel(running["id"])
        deadline = time.monotonic() + 20
        while c.get(running["id"])["status"] != "cancelled":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        c.erase(running["id"])
        with pytest.raises(agentd.NotFoundError):
            c.get(running["id"])


class HookReceiver:
    """A webhook receiver on loopback that answers 200 and keeps what it
    got: (webhook-id header, body)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                outer.got.append((self.headers.get("webhook-id", ""), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def hooks(agentd_bin: str) -> Iterator[tuple[Agentd, HookReceiver]]:
    """An agentd that may deliver webhooks to the receiver's loopback
    address (the operator names it), and the receiver."""
    rc = HookReceiver()
    secret = "whsec_" + base64.b64encode(bytes([7]) * 32).decode()
    s = Agentd(agentd_bin, {"AGENTD_WEBHOOK_SECRET": secret, "AGENTD_TOOL_ALLOW_HOSTS": f"127.0.0.1:{rc.port}"})
    yield s, rc
    s.stop()
    rc.close()


def test_deliveries(hooks: tuple[Agentd, HookReceiver]) -> None:
    server, rc = hooks
    url = f"http://127.0.0.1:{rc.port}/hooks/ticket-42"
    with client_for(server) as c:
        chat = c.create({**specs.debate(), "webhook": {"url": url, "events": ["chat.created", "chat.completed"]}},
                        wait_s=30)
        assert chat["status"] == "completed"
        deadline = time.monotonic() + 30
        while True:
            ds = c.deliveries(chat["id"])["deliveries"]
            if len(ds) == 2 and all(d["status"] == "delivered" for d in ds):
                break
            assert time.monotonic() < deadline, ds
            time.sleep(0.1)
        assert [d["event"] for d in ds] == ["chat.created", "chat.completed"]
        assert ds[0]["seq"] == 1 and ds[1]["seq"] == chat["last_seq"]
        for d in ds:
            assert d["url"] == url and d["webhook_id"] == f"{chat['id']}.{d['seq']}"
            assert d["attempts"] == 1 and d["last_status_code"] == 200 and d["last_error"] is None
            assert d["delivered_at"] and d["next_attempt_at"] is None and d["created_at"] and d["updated_at"]
        assert sorted(h for h, body in rc.got if body["chat_id"] == chat["id"]) == sorted(d["webhook_id"] for d in ds)
        # Paging: after a seq, and a limit.
        assert [d["seq"] for d in c.deliveries(chat["id"], after=1)["deliveries"]] == [chat["last_seq"]]
        assert [d["seq"] for d in c.deliveries(chat["id"], limit=1)["deliveries"]] == [1]
        # A chat without a webhook has none; an unknown chat is a 404.
        plain = c.create(specs.debate(), wait_s=30)
        assert c.deliveries(plain["id"]) == {"deliveries": []}
        with pytest.raises(agentd.NotFoundError):
            c.deliveries(str(uuid.uuid4()))
        with pytest.raises(agentd.BadRequestError) as bad:
            c.deliveries(chat["id"], limit=0)
        assert [p.path for p in bad.value.errors] == ["limit"]


def test_deliveries_of_a_server_without_webhooks(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.debate(), wait_s=30)
        assert c.deliveries(chat["id"])["deliveries"] == []
        with pytest.raises(agentd.NotFoundError):
            c.deliveries(str(uuid.uuid4()))


def png(width: int = 2, height: int = 2) -> str:
    """A red RGB PNG, base64."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    raw = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return base64.b64encode(raw).decode()


def test_human_message_with_an_image(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.human(), wait_s=10)
        pending = chat["pending_input"]
        assert pending is not None and pending["kind"] == "message"
        image = png()
        content: agentd.MultiModalContent = ["Like this:", {"image": {"data": image, "media_type": "image/png"}}]
        c.send_input(chat["id"], pending["request_id"], content=content)
        deadline = time.monotonic() + 20
        while True:
            msgs = c.messages(chat["id"])["messages"]
            if any(m["name"] == "editor" for m in msgs):
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
        human = next(m for m in msgs if m["name"] == "editor")
        assert human["type"] == "MultiModalMessage" and human["role"] == "user"
        assert human["content"] == "Like this:\n<image>"
        parts = human.get("parts", [])
        assert parts[0] == "Like this:" and isinstance(parts[1], dict)
        assert parts[1]["image"]["data"] == image
        # Bad content is the server's 422, with the path of the part.
        chat = c.create(specs.human(), wait_s=10)
        assert chat["pending_input"] is not None
        with pytest.raises(agentd.ValidationError) as bad:
            c.send_input(chat["id"], chat["pending_input"]["request_id"],
                         content=["x", {"image": {"data": "bm90IGFuIGltYWdl"}}])
        assert any(p.path.startswith("/content/1") for p in bad.value.errors), bad.value.errors


def test_async_backend_calls(hooks: tuple[Agentd, HookReceiver]) -> None:
    server, rc = hooks
    name, tag = unique("async-team"), unique("async")

    async def main() -> None:
        async with agentd.AsyncClient(server.url, reconnect_delay=0.05) as c:
            assert (await c.save_team(name, team_spec()))["version"] == 1
            assert (await c.save_team(name, team_spec(max_round=6)))["version"] == 2
            assert (await c.get_team(name))["version"] == 2
            assert (await c.get_team(name, 1)).get("spec", {})["max_round"] == 4
            with pytest.raises(agentd.NotFoundError):
                await c.get_team(name, 3)
            assert [t["version"] async for t in c.iter_teams(page_size=1) if t["name"] == name] == [2]
            assert any(t["name"] == name for t in (await c.list_teams(limit=1000))["teams"])

            url = f"http://127.0.0.1:{rc.port}/hook"
            latest = await c.create_from_saved_team(name, "Tabs?", metadata={"tag": tag}, wait_s=30,
                                                    webhook={"url": url, "events": ["chat.completed"]})
            first = await c.create_from_saved_team(f"{name}@1", "Spaces?", metadata={"tag": tag, "n": 1}, wait_s=30)
            assert latest["team"] == {"name": name, "version": 2} and first["team"] == {"name": name, "version": 1}
            assert [x["id"] async for x in c.iter_chats(team=name, page_size=1)] == [first["id"], latest["id"]]
            assert [x["id"] for x in (await c.list(metadata={"tag": tag, "n": 1}))["chats"]] == [first["id"]]
            assert [x["id"] for x in (await c.list(metadata={"tag": tag},
                                                   created_after=latest["created_at"]))["chats"]] == [first["id"]]
            assert [x["id"] for x in (await c.list(name="debate", team=name,
                                                   created_before=first["created_at"]))["chats"]] == [latest["id"]]

            patched = await c.update_metadata(first["id"], {"n": None, "state": "done"})
            assert patched["metadata"] == {"tag": tag, "state": "done"}

            for _ in range(300):
                ds = (await c.deliveries(latest["id"]))["deliveries"]
                if ds and ds[0]["status"] == "delivered":
                    break
                await asyncio.sleep(0.1)
            assert [(d["event"], d["status"], d["url"]) for d in ds] == [("chat.completed", "delivered", url)]
            assert (await c.deliveries(first["id"]))["deliveries"] == []
            with pytest.raises(agentd.NotFoundError):
                await c.deliveries(str(uuid.uuid4()))

            human = await c.create(specs.human(), wait_s=10)
            assert human["pending_input"] is not None
            await c.send_input(human["id"], human["pending_input"]["request_id"],
                               content=["See:", {"image": {"data": png()}}])
            for _ in range(200):
                msgs = (await c.messages(human["id"]))["messages"]
                if any(m["name"] == "editor" for m in msgs):
                    break
                await asyncio.sleep(0.1)
            assert [m["type"] for m in msgs if m["name"] == "editor"][0] == "MultiModalMessage"

            slow = await c.create(specs.slow())
            with pytest.raises(agentd.ChatNotEndedError):
                await c.erase(slow["id"])
            await c.erase(first["id"])
            with pytest.raises(agentd.NotFoundError):
                await c.get(first["id"])
            await c.cancel(slow["id"])

    asyncio.run(main())
