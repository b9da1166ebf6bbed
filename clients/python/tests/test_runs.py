"""Runs, stop, fork and approvals against the real agentd binary: a chat goes
on run after run, and its event streams replay and follow every run."""

from __future__ import annotations

import json
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest

import agentd
import specs
from support import Agentd, CutProxy, Scripted


def client_for(server: Agentd) -> agentd.Client:
    return agentd.Client(server.url, reconnect_delay=0.05)


def run_log(events: list[agentd.Event]) -> list[str]:
    """A stream in short: "run N", "name:content", "end N: status: detail"."""
    out = []
    for e in events:
        if e.event == "run.started":
            out.append(f"run {e.run}")
        elif e.terminal:
            out.append(f"end {e.run}: {e.data['status']}: {e.data['stop_detail']}")
        elif e.event == "message":
            out.append(f"{e.data['name']}:{e.data['content']}")
    return out


MAX1 = "Maximum number of turns 1 reached."


def test_if_busy_reject_enqueue_interrupt(scripted: Callable[..., Scripted]) -> None:
    # Run 1's turn and run 4's wait for the test.
    sc = scripted(["r1", "r2", "r3", "r4", "r5"], gated=(1, 4))
    with client_for(sc.server) as c:
        chat = c.create(specs.model_agent())
        cid = chat["id"]
        assert chat["run"] == 1 and chat["queued_runs"] == 0 and chat["forked_from"] is None

        # reject (the default): the exception names the active run.
        with pytest.raises(agentd.RunActiveError) as busy:
            c.start_run(cid, "refused")
        err = busy.value
        assert isinstance(err, agentd.ConflictError) and err.status == 409
        assert err.type == "urn:agentd:problem:run-active" and err.run == 1
        assert "run 1 " in err.detail and err.errors == []

        # enqueue: runs after the active one, in order.
        second = c.start_run(cid, "second", if_busy="enqueue")
        assert second["posted_run"] == 2 and second["queued_runs"] == 1 and second["run"] == 1
        third = c.start_run(cid, {"type": "TextMessage", "source": "pm", "content": "third"}, if_busy="enqueue")
        assert third["posted_run"] == 3 and third["queued_runs"] == 2
        sc.gates[1].set()
        with c.events(cid, until_run=3) as stream:
            got = list(stream)
        assert run_log(got) == [
            "run 1", "user:go", "a:r1", f"end 1: completed: {MAX1}",
            "run 2", "user:second", "a:r2", f"end 2: completed: {MAX1}",
            "run 3", "pm:third", "a:r3", f"end 3: completed: {MAX1}",
        ]

        # interrupt: the queued runs are dropped, the active one ends
        # cancelled, the new one runs next (under a number of its own: the
        # dropped run's is never given out again).
        assert c.start_run(cid, "fourth")["posted_run"] == 4
        sc.asked(4)
        assert c.start_run(cid, "dropped", if_busy="enqueue")["posted_run"] == 5
        fifth = c.start_run(cid, "fifth", if_busy="interrupt")
        assert fifth["posted_run"] == 6
        with c.events(cid, after=got[-1].id or 0, until_run=6) as stream:
            rest = list(stream)
        assert run_log(rest) == [
            "run 4", "user:fourth", "end 4: cancelled: External termination requested",
            "run 6", "user:fifth", "a:r5", f"end 6: completed: {MAX1}",
        ]
        end = c.get(cid)
        assert end["run"] == 6 and end["queued_runs"] == 0 and end["status"] == "completed"
        assert end["stop_reason"] == "max_round" and end["stop_detail"] == MAX1


def test_a_replay_goes_past_the_end_of_earlier_runs(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.one_agent(["r1", "r2", "r3"]), wait_s=30)
        for task in ("two", "three"):
            n = c.start_run(chat["id"], task)["posted_run"]
            list(c.events(chat["id"], after=c.get(chat["id"])["last_seq"], until_run=n))
        with c.events(chat["id"]) as stream:
            every = list(stream)
        # It ended where the server ended it, without coming back for more.
        assert stream.reconnects == 0
        assert run_log(every) == [
            "run 1", "user:go", "a:r1", f"end 1: completed: {MAX1}",
            "run 2", "user:two", "a:r2", f"end 2: completed: {MAX1}",
            "run 3", "user:three", "a:r3", f"end 3: completed: {MAX1}",
        ]
        assert [e.id for e in every] == list(range(1, len(every) + 1))
        # From the middle of run 1: the rest, to the end of run 3.
        assert list(c.events(chat["id"], after=3)) == every[3:]
        # until_run stops at that run's end, not the chat's.
        assert run_log(list(c.events(chat["id"], until_run=2)))[-1] == f"end 2: completed: {MAX1}"
        # Past the end: nothing (the server answers 204).
        assert list(c.events(chat["id"], after=every[-1].id or 0)) == []


def test_follow_stays_open_across_runs(server: Agentd) -> None:
    with client_for(server) as c:
        chat = c.create(specs.one_agent(["r1", "r2", {"content": "r3", "delay_ms": 200}]))
        cid = chat["id"]
        got: queue.Queue[agentd.Event] = queue.Queue()
        stream = c.events(cid, follow=True)

        def read() -> None:
            # A follow stream ends when its reader closes it: here after run 3.
            with stream:
                for ev in stream:
                    got.put(ev)
                    if ev.terminal and ev.run == 3:
                        break

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def until_end(n: int) -> list[agentd.Event]:
            out = []
            while True:
                ev = got.get(timeout=30)
                out.append(ev)
                if ev.terminal and ev.run == n:
                    return out

        seen = until_end(1)
        # The run is over and the stream is still open: nothing comes until
        # the next run is posted.
        with pytest.raises(queue.Empty):
            got.get(timeout=0.5)
        assert reader.is_alive()
        c.start_run(cid, "two")
        seen += until_end(2)
        c.start_run(cid, "three", max_round=1)
        seen += until_end(3)
        assert run_log(seen) == [
            "run 1", "user:go", "a:r1", f"end 1: completed: {MAX1}",
            "run 2", "user:two", "a:r2", f"end 2: completed: {MAX1}",
            "run 3", "user:three", "a:r3", f"end 3: completed: {MAX1}",
        ]
        started = [e for e in seen if e.event == "run.started"]
        assert started[2].data == {"run": 3, "max_round": 1}
        reader.join(10)
        assert not reader.is_alive()


def test_stop_ends_the_run_after_the_turn(scripted: Callable[..., Scripted]) -> None:
    sc = scripted(["first", "second", "third"], gated=(1,))
    with client_for(sc.server) as c:
        chat = c.create(specs.model_agent(max_round=10))
        cid = chat["id"]
        with c.events(cid, until_run=1) as stream:
            seen = []
            for ev in stream:
                seen.append(ev)
                if ev.event == "speaker.selected":
                    # In the middle of the turn, which then finishes.
                    stopping = c.stop(cid)
                    assert stopping["id"] == cid and stopping["status"] == "running"
                    sc.gates[1].set()
        assert run_log(seen) == ["run 1", "user:go", "a:first", "end 1: completed: External termination requested"]
        chat = c.get(cid)
        assert chat["stop_reason"] == "external" and chat["turns"] == 1
        # No run active: the chat is answered unchanged.
        again = c.stop(cid)
        assert again["status"] == "completed" and again["last_seq"] == chat["last_seq"]
        # The chat takes the next run, which goes on without a task.
        n = c.start_run(cid, max_round=1)["posted_run"]
        rest = list(c.events(cid, after=chat["last_seq"], until_run=n))
        assert run_log(rest) == ["run 2", "a:second", f"end 2: completed: {MAX1}"]


def test_fork_at_a_run_end_with_a_run(server: Agentd) -> None:
    with client_for(server) as c:
        spec = {"task": "argue", "max_round": 3, "agents": [
            {"name": "pro", "type": "assistant", "model": {"provider": "replay", "responses": ["yes", "yes!"]}},
            {"name": "con", "type": "assistant", "model": {"provider": "replay", "responses": ["no", "no!"]}}]}
        src = c.create(spec, wait_s=30)
        before = list(c.events(src["id"]))
        end = before[-1].id
        assert end is not None and before[-1].terminal

        fork = c.fork(src["id"], at_seq=end, run={"task": "Once more, shorter.", "max_round": 1})
        assert fork["id"] != src["id"]
        assert fork["forked_from"] == {"chat_id": src["id"], "seq": end}
        forked = list(c.events(fork["id"], until_run=2))
        # The copy is the source's log event for event, then the fork's run.
        assert forked[:len(before)] == before
        assert run_log(forked[len(before):]) == [
            "run 2", "user:Once more, shorter.", "con:no!", f"end 2: completed: {MAX1}"]
        # The source is untouched.
        assert list(c.events(src["id"])) == before
        assert c.get(src["id"])["run"] == 1

        # A fork without arguments copies the whole log and waits.
        whole = c.fork(src["id"])
        assert whole["forked_from"] == {"chat_id": src["id"], "seq": end}
        assert whole["status"] == "completed" and whole["last_seq"] == end

        # Inside a turn is no place to fork: the problem names /at_seq.
        inside = next(e.id for e in before if e.event == "speaker.selected")
        with pytest.raises(agentd.ValidationError) as bad:
            c.fork(src["id"], at_seq=inside)
        assert [p.path for p in bad.value.errors] == ["/at_seq"]


class ToolServer:
    """An http tool on loopback: it answers "<name> done with <n>" and keeps
    every call it gets (the body agentd posts and its Idempotency-Key)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                body["idempotency_key"] = self.headers.get("Idempotency-Key")
                outer.calls.append(body)
                out = f"{body['name']} done with {body['arguments']['n']}".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/tool"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def tools(agentd_bin: str) -> Iterator[tuple[Agentd, ToolServer]]:
    """An agentd that may call tools on loopback, and the tool server."""
    ts = ToolServer()
    s = Agentd(agentd_bin, {"AGENTD_TOOL_ALLOW_PRIVATE": "true"})
    yield s, ts
    s.stop()
    ts.close()


def pending(c: agentd.Client, chat_id: str, after: str = "") -> agentd.PendingInput:
    """The chat's pending input, once it is a new one."""
    deadline = time.monotonic() + 30
    while True:
        chat = c.get(chat_id)
        p = chat["pending_input"]
        if p is not None and p["request_id"] != after:
            return p
        assert chat["status"] in ("queued", "running", "awaiting_input"), chat
        assert time.monotonic() < deadline, chat
        time.sleep(0.02)


def test_approve_edit_and_reject(tools: tuple[Agentd, ToolServer]) -> None:
    server, ts = tools
    with client_for(server) as c:
        chat = c.create(specs.pay_and_refund(ts.url))
        cid = chat["id"]

        # Approved as the model asked.
        first = pending(c, cid)
        assert first["kind"] == "approval" and first["agent"] == "clerk"
        calls = first.get("tool_calls", [])
        assert [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in calls] == [("pay", {"n": 100})]
        assert ts.calls == []  # held: nothing ran yet
        c.send_input(cid, first["request_id"], approvals=[{"tool_call_id": calls[0]["id"], "approve": True}])

        # Edited (checked against the tool's schema) and rejected.
        second = pending(c, cid, after=first["request_id"])
        pay, refund = (t["id"] for t in second.get("tool_calls", []))
        with pytest.raises(agentd.ValidationError) as bad:
            c.send_input(cid, second["request_id"], approvals=[
                {"tool_call_id": pay, "approve": True, "arguments": {"n": "ten"}},
                {"tool_call_id": refund, "approve": False}])
        assert "/approvals/0/arguments" in [p.path for p in bad.value.errors], bad.value.errors
        assert c.get(cid)["pending_input"] == second  # still waiting for a valid answer
        c.send_input(cid, second["request_id"], approvals=[
            {"tool_call_id": pay, "approve": True, "arguments": {"n": 10}},
            {"tool_call_id": refund, "approve": False, "reason": "no refunds today"}])

        events = list(c.events(cid))
        assert events[-1].event == "chat.completed"
        summaries = [e.data["content"] for e in events
                     if e.event == "message" and e.data["type"] == "ToolCallSummaryMessage"]
        assert summaries == [
            "pay: pay done with 100",
            "pay: pay done with 10\nrefund: Error: Tool call was not approved. Reason: no refunds today",
        ]
        asked = [e.data["kind"] for e in events if e.event == "input.requested"]
        assert asked == ["approval", "approval"]
    # The tool ran twice: as approved, then with the edit; never the refund.
    assert [(x["name"], x["arguments"]) for x in ts.calls] == [("pay", {"n": 100}), ("pay", {"n": 10})]
    assert all(x["chat_id"] == cid and x["idempotency_key"] == f"{cid}/{x['tool_call_id']}" for x in ts.calls)


def multi_run_chat(c: agentd.Client, runs: int) -> str:
    """A chat of several runs, each of several turns, all ended."""
    cycles = 2
    spec = specs.debate(cycles=cycles, delay_ms=10)
    spec["termination"] = {"max_messages": 3}
    for agent in spec["agents"]:
        agent["model"]["responses"] = [f"{agent['name']} says {i}." for i in range(runs * cycles)]
    chat = c.create(spec)
    last = 1
    for i in range(2, runs + 1):
        last = c.start_run(chat["id"], f"task {i}", if_busy="enqueue")["posted_run"]
    list(c.events(chat["id"], until_run=last))
    return chat["id"]


def test_reconnect_in_a_multi_run_replay(server: Agentd) -> None:
    """Cuts at every place of a replay of four runs: each resumed stream
    yields the whole log once, in order, past every earlier run's end."""
    with client_for(server) as direct:
        cid = multi_run_chat(direct, 4)
        want = list(direct.events(cid))
    assert [e.run for e in want if e.event == "run.started"] == [1, 2, 3, 4]
    # From a little over the answer's head and one event to a few events.
    for cut in range(700, 1400, 61):
        proxy = CutProxy(server.address, cut_after=cut)
        try:
            with agentd.Client(proxy.url, reconnect_delay=0.01, max_reconnects=3) as c:
                stream = c.events(cid)
                got = list(stream)
            assert got == want, cut
            assert stream.reconnects == proxy.cuts_made >= 3, (cut, proxy.cuts_made, stream.reconnects)
        finally:
            proxy.close()


def test_reconnect_in_a_live_multi_run_stream(server: Agentd) -> None:
    """A stream that follows runs as they are made, cut every few hundred
    bytes, gets every event once: the same as a replay afterwards."""
    proxy = CutProxy(server.address, cut_after=600)
    try:
        with client_for(server) as direct:
            spec = specs.debate(cycles=2, delay_ms=40)
            spec["termination"] = {"max_messages": 4}
            for agent in spec["agents"]:
                agent["model"]["responses"] = [
                    {"content": f"{agent['name']} says {i}.", "delay_ms": 40} for i in range(6)]
            chat = direct.create(spec)
            for i in (2, 3):
                direct.start_run(chat["id"], f"task {i}", if_busy="enqueue")
            with agentd.Client(proxy.url, reconnect_delay=0.02, max_reconnects=5) as c:
                stream = c.events(chat["id"], until_run=3)
                got = list(stream)
            want = list(direct.events(chat["id"]))
        assert got == want
        assert [e.run for e in got if e.terminal] == [1, 2, 3]
        assert proxy.cuts_made >= 5 and stream.reconnects >= 5, (proxy.cuts_made, stream.reconnects)
    finally:
        proxy.close()


def test_run_active_problem_without_a_run_number() -> None:
    body = json.dumps({"type": "urn:agentd:problem:run-active", "title": "Conflict", "status": 409,
                       "detail": "a run is active", "errors": []}).encode()
    err = agentd._errors.error_from_response(409, {}, body)
    assert isinstance(err, agentd.RunActiveError) and err.run is None and err.detail == "a run is active"
    other = agentd._errors.error_from_response(409, {}, body.replace(b"run-active", b"conflict"))
    assert type(other) is agentd.ConflictError
