"""Test fixtures that are real processes and servers: the agentd binary, a
scripted OpenAI-wire model server, and a TCP proxy that cuts connections.

Also used by the AgentChat comparison (autogen_check/), which runs inside the
AgentChat environment, so this module needs nothing but the standard library.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ADDR_RE = re.compile(r'msg="agentd serving" addr=(\S+)|"msg":"agentd serving","addr":"([^"]+)"')


class Agentd:
    """The real agentd binary on a free loopback port, with an embedded
    SQLite store in a temporary directory and no sandbox."""

    def __init__(self, binary: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = tempfile.mkdtemp(prefix="agentd-py-")
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTD_", "OPENAI_"))}
        child_env.update(
            {
                "AGENTD_ADDR": "127.0.0.1:0",
                "AGENTD_DATA_DIR": self.data_dir,
                "AGENTD_SANDBOX": "none",
                "AGENTD_RATE_LIMIT": "0",
                "AGENTD_SHUTDOWN_GRACE": "5s",
                "AGENTD_SHUTDOWN_DRAIN": "0s",
            }
        )
        child_env.update(env or {})
        self.proc = subprocess.Popen([binary], env=child_env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.logs: list[str] = []
        found = threading.Event()
        self.url = ""

        def read() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.logs.append(line)
                m = _ADDR_RE.search(line)
                if m and not found.is_set():
                    self.url = "http://" + (m.group(1) or m.group(2))
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 60
        while not found.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("agentd did not start:\n" + "\n".join(self.logs))

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.url.removeprefix("http://").rpartition(":")
        return host, int(port)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def completion(req: dict[str, Any], reply: dict[str, Any], n: int) -> dict[str, Any]:
    """A non-streaming chat completion for a scripted reply."""
    calls = [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c.get("arguments", "{}")}}
        for c in reply.get("tool_calls", [])
    ]
    msg: dict[str, Any] = {"role": "assistant", "content": reply.get("content"), "refusal": None}
    if calls:
        msg["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1700000000,
        "model": req.get("model", "gpt-4o-mini"),
        "system_fingerprint": "fp_script",
        "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": usage(reply),
    }


def usage(reply: dict[str, Any]) -> dict[str, int]:
    u = dict(reply.get("usage", {"prompt_tokens": 10, "completion_tokens": 5}))
    u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
    return dict(u)


def pieces(s: str, n: int = 8) -> list[str]:
    """s in pieces of n characters, like token deltas."""
    return [s[i:i + n] for i in range(0, len(s), n)]


def chunks(req: dict[str, Any], reply: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The chat.completion.chunk objects of a streamed scripted reply."""
    head = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": req.get("model", "gpt-4o-mini"),
        "system_fingerprint": "fp_script",
    }

    def one(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    out = [one({"role": "assistant", "content": ""})]
    out += [one({"content": p}) for p in pieces(reply.get("content") or "")]
    calls = reply.get("tool_calls", [])
    for i, c in enumerate(calls):
        out.append(one({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                        "function": {"name": c["name"], "arguments": ""}}]}))
        for p in pieces(c.get("arguments", "{}")):
            out.append(one({"tool_calls": [{"index": i, "function": {"arguments": p}}]}))
    out.append(one({}, "tool_calls" if calls else "stop"))
    if (req.get("stream_options") or {}).get("include_usage"):
        out.append(dict(head, choices=[], usage=usage(reply)))
    return out


class ScriptedModel:
    """An OpenAI-wire chat-completions server on loopback that answers each
    request with the next reply of its script (``content``, ``tool_calls``
    with ids, ``usage``, ``delay_ms``), plain or streamed as the request
    asks, and keeps every request body."""

    def __init__(
        self,
        script: list[dict[str, Any]],
        hold: threading.Event | None = None,
        gates: dict[int, threading.Event] | None = None,
    ) -> None:
        self.script = list(script)
        #: When given, requests wait until it is set before they are answered.
        self.hold = hold
        #: Request n (from 1) is answered once gates[n] is set: a turn that
        #: takes as long as a test needs.
        self.gates = dict(gates or {})
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                if outer.hold is not None:
                    outer.hold.wait(30)
                with outer.lock:
                    outer.requests.append(req)
                    n = len(outer.requests)
                    reply = outer.script.pop(0) if outer.script else None
                gate = outer.gates.get(n)
                if gate is not None:
                    gate.wait(60)
                if reply is None:
                    body = b'{"error": {"message": "script exhausted", "type": "invalid_request_error"}}'
                    self.send_response(400)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                # A pause before the answer (the script's "delay_ms"), as a
                # model thinking: streams see the turn begin before its reply.
                time.sleep(reply.get("delay_ms", 0) / 1000)
                if req.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    try:
                        for i, c in enumerate(chunks(req, reply, n)):
                            if i:
                                # Typed, as a model does, not sent at once:
                                # agentd joins the fragments a stream has not
                                # taken yet, so a burst may reach a client as
                                # one delta.
                                time.sleep(0.02)
                            self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                            self.wfile.flush()
                        self.wfile.write(b"data: [DONE]\n\n")
                    except OSError:
                        pass  # the caller went away (a cancelled chat)
                    return
                out = json.dumps(completion(req, reply, n)).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    pass  # the caller went away (a cancelled turn)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Scripted:
    """An agentd whose OpenAI endpoint is a scripted model; request n of
    the model waits for gate n when there is one (a turn as long as the test
    needs it to be, whatever the load of the machine)."""

    def __init__(self, binary: str, replies: list[str], gated: tuple[int, ...] = ()) -> None:
        self.gates = {n: threading.Event() for n in gated}
        self.model = ScriptedModel([{"content": r} for r in replies], gates=self.gates)
        self.server = Agentd(binary, {"OPENAI_BASE_URL": self.model.url, "OPENAI_API_KEY": "scripted"})

    def asked(self, n: int, within: float = 30) -> None:
        """Waits until the model has had its nth request."""
        deadline = time.monotonic() + within
        while len(self.model.requests) < n:
            assert time.monotonic() < deadline, len(self.model.requests)
            time.sleep(0.01)

    def close(self) -> None:
        for g in self.gates.values():
            g.set()
        self.server.stop()
        self.model.close()


class CutProxy:
    """A TCP proxy on loopback in front of ``target`` that closes each
    connection once it has passed ``cut_after`` bytes from the server to the
    client, wherever that falls (in the middle of an event, of a line, of a
    chunk), for the first ``cuts`` connections. ``cuts_made`` counts them."""

    def __init__(self, target: tuple[str, int], cut_after: int, cuts: int = 1000) -> None:
        self.target = target
        self.cut_after = cut_after
        self.cuts_left = cuts
        self.cuts_made = 0
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.target)
        with self.lock:
            cut = self.cuts_left > 0
            if cut:
                self.cuts_left -= 1

        def up() -> None:
            try:
                while data := client.recv(65536):
                    upstream.sendall(data)
            except OSError:
                pass

        threading.Thread(target=up, daemon=True).start()
        passed = 0
        try:
            while data := upstream.recv(65536):
                if cut and passed + len(data) >= self.cut_after:
                    client.sendall(data[: self.cut_after - passed])
                    with self.lock:
                        self.cuts_made += 1
                    break
                client.sendall(data)
                passed += len(data)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self.closed = True
        self.sock.close()
