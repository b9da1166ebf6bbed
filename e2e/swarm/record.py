"""Records runs of OpenAI Swarm's own run loop (swarm/core.py) against a
scripted model, for agentd's golden test of its openai_swarm protocol.

    python3 record.py SCENARIO.json... OUT_DIR

Each scenario holds an agentd chat spec whose speaker selection is
{"method": "swarm", "protocol": "openai_swarm"}, the model's script and the
chat's further runs (README.md). The spec is made into Swarm's Agents as a
Swarm program would write them:

- each python_function tool is its source executed as Python (its global
  imports first) and the function it defines, which Swarm describes with
  function_to_json and calls in this process;
- each hand-off is a function with the hand-off's name and its description
  as docstring that returns the target Agent;
- an agent's functions are its tools, then its hand-offs, in the spec's
  order; its instructions are its system_message, or, for a
  system_message_template, a callable that fills the template in from the
  context variables (str.format_map over Swarm's defaultdict(str)), or
  Swarm's default;
- parallel_tool_calls is the agent's (Swarm's default: true).

The first run is Swarm.run(agent=<first agent>, messages=[the task as a user
message], context_variables=<the spec's>); each further run passes the
previous run's messages with the new task after them, the agent it ended
with and its context variables (with the run's own changes merged in, a
null removing one, as agentd merges them), as a Swarm program that goes on
with a conversation does.

The fixture holds every request body the model server received, and for
each run the index of its first request, its messages, the agent it ended
with and its context variables.
"""

import copy
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from openai import OpenAI
from swarm import Agent, Swarm


class ScriptServer:
    """A chat-completions server that answers requests in order from a
    script and logs every request body as it came."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[Any] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.lock:
                    outer.requests.append(json.loads(body))
                    n = len(outer.requests)
                    reply = outer.script.pop(0) if outer.script else None
                if reply is None:
                    self.send_response(400)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "script exhausted", "type": "invalid_request_error"}}')
                    return
                out = json.dumps(completion(outer.requests[-1], reply, n)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def completion(req: dict[str, Any], reply: dict[str, Any], n: int) -> dict[str, Any]:
    """The response body for a scripted reply (the shape openaitest answers
    with, as e2e/autogen/record.py writes it)."""
    calls = [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c.get("arguments", "{}")}}
        for c in reply.get("tool_calls", [])
    ]
    msg: dict[str, Any] = {"role": "assistant", "content": reply.get("content"), "refusal": None}
    if calls:
        msg["tool_calls"] = calls
    usage = dict(reply.get("usage", {"prompt_tokens": 10, "completion_tokens": 5}))
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1700000000,
        "model": req["model"],
        "system_fingerprint": "fp_script",
        "choices": [
            {"index": 0, "message": msg, "logprobs": None, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": usage,
    }


def import_code(im: Any) -> str:
    """A global import as Python source (the forms a FunctionTool's
    global_imports take)."""
    if isinstance(im, str):
        return f"import {im}"
    if "module" in im:
        names = ", ".join(i if isinstance(i, str) else f"{i['name']} as {i['alias']}" for i in im["imports"])
        return f"from {im['module']} import {names}"
    return f"import {im['name']} as {im['alias']}"


def define(source: str, imports: list[Any]) -> Any:
    """The function a python_function's source defines: the imports and the
    source executed in fresh globals, and the function named after the
    source's first "def " (as agentd's sandbox harness defines it)."""
    scope: dict[str, Any] = {}
    for im in imports:
        exec(import_code(im), scope)
    exec(source, scope)
    at = source.index("def ") + 4
    return scope[source[at : source.index("(", at)]]


def function_of(tool: dict[str, Any]) -> Any:
    """The Python function of a python_function tool, which must be named
    as the tool is: Swarm names a function by its __name__."""
    impl = tool["implementation"]
    if impl.get("type") != "python_function":
        raise ValueError(f"tool {tool['name']}: the recorder runs python_function tools only")
    fn = define(impl["source_code"], impl.get("global_imports", []))
    if fn.__name__ != tool["name"]:
        raise ValueError(f"tool {tool['name']}: its function is {fn.__name__}, and Swarm names a tool by its function")
    return fn


def handoff_function(h: Any, agents: dict[str, Agent]) -> Any:
    """A hand-off as a Swarm program writes one: a function without
    parameters that returns the target agent, named as the hand-off is and
    with its description as docstring."""
    if isinstance(h, str):
        h = {"target": h}
    target = h["target"]

    def transfer() -> Agent:
        return agents[target]

    transfer.__name__ = h.get("name") or "transfer_to_" + target.lower()
    transfer.__doc__ = h.get("description")
    return transfer


def instructions_of(a: dict[str, Any]) -> Any:
    if "system_message_template" in a:
        template = a["system_message_template"]

        def instructions(context_variables: dict[str, Any]) -> str:
            return template.format_map(context_variables)

        return instructions
    if "system_message" in a:
        return a["system_message"]
    return Agent.model_fields["instructions"].default


def build_agents(spec: dict[str, Any]) -> dict[str, Agent]:
    tools = {t["name"]: function_of(t) for t in spec.get("tools", [])}
    agents: dict[str, Agent] = {}
    for a in spec["agents"]:
        if a.get("type", "assistant") != "assistant":
            raise ValueError(f"agent {a['name']}: Swarm has assistants only")
        agents[a["name"]] = Agent(
            name=a["name"],
            model="gpt-4o-mini",
            instructions=instructions_of(a),
            parallel_tool_calls=a.get("parallel_tool_calls", True),
        )
    # Functions are set once every agent exists: a hand-off returns one.
    for a in spec["agents"]:
        fns = [tools[n] for n in a.get("tools", [])]
        fns += [handoff_function(h, agents) for h in a.get("handoffs", [])]
        agents[a["name"]].functions = fns
    return agents


class Program(Swarm):
    """Swarm's run loop, with the one step of translation a spec needs: a
    function returns an agent by name (Agent(name=...) or a Result whose
    agent is one), and a Swarm program returns the agent object itself, so
    the agent a function returns is the program's agent of that name.
    Everything else (the tool message, {"assistant": name}, the switch) is
    Swarm's own."""

    def __init__(self, client: Any, agents: dict[str, Agent]) -> None:
        super().__init__(client=client)
        self.agents = agents

    def handle_function_result(self, result: Any, debug: bool) -> Any:
        r = super().handle_function_result(result, debug)
        if r.agent is not None:
            r.agent = self.agents[r.agent.name]
        return r


def record(scenario: dict[str, Any]) -> dict[str, Any]:
    spec = scenario["spec"]
    sel = spec.get("speaker_selection", {})
    if sel.get("method") != "swarm" or sel.get("protocol") != "openai_swarm":
        raise ValueError('the scenario\'s speaker_selection must be {"method": "swarm", "protocol": "openai_swarm"}')
    agents = build_agents(spec)
    server = ScriptServer(scenario["script"])
    try:
        client = Program(OpenAI(base_url=server.url, api_key="sk-script", max_retries=0), agents)
        agent = agents[spec["agents"][0]["name"]]
        history: list[dict[str, Any]] = [{"role": "user", "content": spec["task"]}]
        variables = dict(spec.get("context_variables", {}))
        runs = []
        for r in [None] + scenario.get("runs", []):
            if r is not None:
                if r.get("task") is not None:
                    history.append({"role": "user", "content": r["task"]})
                # A run's change of the variables, as agentd merges it: a
                # null removes one.
                for k, v in r.get("context_variables", {}).items():
                    if v is None:
                        variables.pop(k, None)
                    else:
                        variables[k] = v
            first = len(server.requests)
            resp = client.run(agent=agent, messages=history, context_variables=variables)
            history = history + resp.messages
            agent, variables = resp.agent, copy.deepcopy(resp.context_variables)
            runs.append(
                {
                    "first_request": first,
                    "messages": resp.messages,
                    "agent": agent.name,
                    "context_variables": copy.deepcopy(variables),
                }
            )
        if server.script:
            raise RuntimeError(f"{len(server.script)} scripted replies were never asked for")
        return {"requests": server.requests, "runs": runs}
    finally:
        server.close()


def main() -> None:
    *paths, out = sys.argv[1:]
    for p in paths:
        scenario = json.loads(Path(p).read_text())
        fixture = record(scenario)
        dest = Path(out) / Path(p).name
        dest.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
        print(f"{dest}: {len(fixture['requests'])} requests, {len(fixture['runs'])} runs")


if __name__ == "__main__":
    main()
