"""Records golden runs of AutoGen AgentChat 0.7.5 for agentd's fidelity tests.

    python3 record.py SCENARIO.json... OUTDIR

Each scenario is an agentd chat spec plus a model script (see README.md). The
spec is built as the equivalent AgentChat team, with OpenAIChatCompletionClient
pointed at a scripted OpenAI-compatible server that runs in this process on
loopback and answers from the script in order. The fixture OUTDIR/<name>.json
holds every request body the server received, the run's transcript (source,
type, content of every message of TaskResult.messages) and
TaskResult.stop_reason. A scenario with further runs ("runs") calls
team.run again on the same team for each; the fixture's "runs" holds each
further run's transcript and stop reason (or the exception it raised).

Only the recorder's own scaffolding is here: the team, agents, termination
conditions and the model client are AutoGen's, unchanged.
"""

import asyncio
import dataclasses
import json
import os
import sys

# tiktoken (token-limited contexts) reads its encodings from the cache that
# tiktokencache fills with agentd's embedded files: the recorder has no
# network. record.sh fills it first.
os.environ["TIKTOKEN_CACHE_DIR"] = os.path.join(os.getcwd(), ".tiktoken-cache")
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from autogen_core import CancellationToken, Image
from autogen_core.model_context import (
    BufferedChatCompletionContext,
    HeadAndTailChatCompletionContext,
    TokenLimitedChatCompletionContext,
)
from autogen_core.tools import BaseTool, ToolSchema
from autogen_agentchat.agents import AssistantAgent, MessageFilterAgent, MessageFilterConfig, SocietyOfMindAgent
from autogen_agentchat.base import Handoff, Team
from autogen_agentchat.conditions import (
    ExternalTermination,
    FunctionCallTermination,
    HandoffTermination,
    MaxMessageTermination,
    SourceMatchTermination,
    TextMentionTermination,
    TextMessageTermination,
    TokenUsageTermination,
)
from autogen_agentchat.messages import HandoffMessage, MultiModalMessage, StructuredMessage, TextMessage
from autogen_agentchat.teams import DiGraph, GraphFlow, MagenticOneGroupChat, RoundRobinGroupChat, SelectorGroupChat, Swarm
from autogen_ext.models.openai import OpenAIChatCompletionClient

MODEL = "gpt-4o-mini"


class Plan(BaseModel):
    """A plan: every field kind agentd reproduces."""

    title: str
    steps: list[str]
    priority: int
    confidence: float = 0.5
    done: bool = False
    note: Optional[str] = Field(default=None, description="Anything else.")
    kind: Literal["bug", "feature"] = "feature"


class Verdict(BaseModel):
    verdict: Literal["APPROVED", "REJECTED"]
    score: float


# The structured-output types a scenario's agent may name (output_schema's
# name): the team is built in Python with the class itself, as AgentChat
# cannot load a team with output_content_type from its component JSON
# ("not registered"), and the scenario's schema must be the class's.
OUTPUT_TYPES = {"Plan": Plan, "Verdict": Verdict}


def output_type(o: dict[str, Any]) -> type[BaseModel]:
    cls = OUTPUT_TYPES[o["name"]]
    if cls.model_json_schema() != o["schema"]:
        raise ValueError(f"output_schema {o['name']} is not {cls.__name__}.model_json_schema(): {cls.model_json_schema()}")
    return cls


def agent_systems(spec: dict[str, Any] | None) -> dict[str, str]:
    """The agents whose requests can be told apart: each agent's
    system_message mapped to its name, for the messages no other agent of
    the spec has."""
    count: dict[str, int] = {}
    for a in (spec or {}).get("agents", []):
        if isinstance(a.get("system_message"), str):
            count[a["system_message"]] = count.get(a["system_message"], 0) + 1
    return {
        a["system_message"]: a["name"]
        for a in (spec or {}).get("agents", [])
        if isinstance(a.get("system_message"), str) and count[a["system_message"]] == 1
    }


def agent_of(req: dict[str, Any], systems: dict[str, str]) -> str:
    """The agent that made a request: the one whose system_message is the
    request's first message (a system message); "" when there is none."""
    msgs = req.get("messages") or []
    if msgs and msgs[0].get("role") == "system" and isinstance(msgs[0].get("content"), str):
        return systems.get(msgs[0]["content"], "")
    return ""


class ScriptServer:
    """A chat-completions server that answers from a script and logs bodies.

    A request gets the first remaining reply that is addressed to its agent
    ("agent", the agent agent_of finds) or to no one. A reply with
    "delay_ms" is held back that long after its request arrived. A reply
    with "stop": true first sets the team's ExternalTermination, as a
    client that asks the run to stop while that request is in flight.

    Each request's arrival is logged too (arrivals): its agent and the
    earlier requests still unanswered when it came ("open"), which are the
    ones whose order against it no one decides. A request counts as
    answered just before its response is written, so a request made after
    reading a response never finds that one open."""

    def __init__(self, script: list[dict[str, Any]], systems: dict[str, str]) -> None:
        self.script = list(script)
        self.systems = systems
        for r in self.script:
            if "agent" in r and r["agent"] not in systems.values():
                raise ValueError(
                    f"a reply is addressed to {r['agent']!r}, whose requests cannot be told apart"
                    " (it needs a system_message no other agent has)"
                )
        self.requests: list[Any] = []
        self.arrivals: list[dict[str, Any]] = []
        self.addressed: list[bool] = []
        self.unanswered: set[int] = set()
        self.lock = threading.Lock()
        self.external = ExternalTermination()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                req = json.loads(body)
                agent = agent_of(req, outer.systems)
                with outer.lock:
                    i = len(outer.requests)
                    outer.requests.append(req)
                    outer.arrivals.append({"agent": agent, "open": sorted(outer.unanswered)})
                    outer.unanswered.add(i)
                    n = len(outer.requests)
                    reply = None
                    for k, r in enumerate(outer.script):
                        if r.get("agent") in (None, agent):
                            reply = outer.script.pop(k)
                            break
                    outer.addressed.append(reply is not None and "agent" in reply)
                if reply is not None and reply.get("stop"):
                    outer.external.set()
                if reply is not None and reply.get("delay_ms"):
                    time.sleep(reply["delay_ms"] / 1000)
                with outer.lock:
                    outer.unanswered.discard(i)
                if reply is None:
                    self.send_response(400)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "script exhausted", "type": "invalid_request_error"}}')
                    return
                out = json.dumps(completion(req, reply, n)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def check_concurrent(self) -> None:
        """Requests that overlapped may have come in either order, so the
        reply each got must not depend on that order: both must have been
        addressed to their agents."""
        for j, a in enumerate(self.arrivals):
            for i in a["open"]:
                if not (self.addressed[i] and self.addressed[j]):
                    raise RuntimeError(
                        f"requests {i} ({self.arrivals[i]['agent'] or 'unknown'}) and {j} ({a['agent'] or 'unknown'})"
                        " were in flight together: their replies must name their agents"
                    )

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()
            self.arrivals.clear()
            self.addressed.clear()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def completion(req: dict[str, Any], reply: dict[str, Any], n: int) -> dict[str, Any]:
    """The response body for a scripted reply (same shape as openaitest's)."""
    calls = [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c.get("arguments", "{}")}}
        for c in reply.get("tool_calls", [])
    ]
    msg: dict[str, Any] = {"role": "assistant", "content": reply.get("content"), "refusal": None}
    if "reasoning_content" in reply:
        # As DeepSeek, vLLM and LiteLLM send a reasoning model's thinking.
        msg["reasoning_content"] = reply["reasoning_content"]
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
            {
                "index": 0,
                "message": msg,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": usage,
    }


class AnyArgs(BaseModel):
    model_config = ConfigDict(extra="allow")


class AnyResult(BaseModel):
    pass


class ScriptedTool(BaseTool[AnyArgs, AnyResult]):
    """A tool with the spec's name, description and parameters whose result is
    fixed by the scenario (agentd's side serves the same text over HTTP)."""

    def __init__(self, spec: dict[str, Any], result: str) -> None:
        super().__init__(AnyArgs, AnyResult, spec["name"], spec.get("description", ""))
        self._parameters = spec.get("parameters", {"type": "object", "properties": {}})
        self._result = result

    @property
    def schema(self) -> ToolSchema:
        return ToolSchema(name=self.name, description=self.description, parameters=self._parameters, strict=False)

    async def run(self, args: AnyArgs, cancellation_token: CancellationToken) -> Any:
        return self._result

    def return_value_as_string(self, value: Any) -> str:
        return str(value)


def condition(c: dict[str, Any]) -> Any:
    """The AgentChat termination condition for an agentd condition."""
    key, v = next(iter(c.items()))
    if key == "max_messages":
        return MaxMessageTermination(v, include_agent_event=c.get("include_agent_event", False))
    if key == "include_agent_event":
        return condition({"max_messages": c["max_messages"], "include_agent_event": v})
    if key == "text_message":
        return TextMessageTermination(source=v.get("source"))
    if key == "text_mention":
        return TextMentionTermination(v["text"], sources=v.get("sources"))
    if key == "token_usage":
        return TokenUsageTermination(
            max_total_token=v.get("max_total_tokens"),
            max_prompt_token=v.get("max_prompt_tokens"),
            max_completion_token=v.get("max_completion_tokens"),
        )
    if key == "handoff":
        return HandoffTermination(v["target"])
    if key == "source_match":
        return SourceMatchTermination(v["sources"])
    if key == "function_call":
        return FunctionCallTermination(v["name"])
    if key in ("any", "all"):
        parts = [condition(p) for p in v]
        out = parts[0]
        for p in parts[1:]:
            out = (out | p) if key == "any" else (out & p)
        return out
    raise ValueError(f"condition {key} has no recorder mapping")


def model_context(c: dict[str, Any], client: OpenAIChatCompletionClient) -> Any:
    """The AgentChat model context for an agentd context; a token-limited
    one counts with the agent's (or selector's) own client."""
    kind = c.get("type", "buffered" if "buffer_size" in c else "unbounded")
    if kind == "buffered":
        return BufferedChatCompletionContext(buffer_size=c["buffer_size"])
    if kind == "head_and_tail":
        return HeadAndTailChatCompletionContext(head_size=c["head_size"], tail_size=c["tail_size"])
    if kind == "token_limited":
        return TokenLimitedChatCompletionContext(client, token_limit=c["token_limit"])
    raise ValueError(f"context {c!r} has no recorder mapping")


def agent_client(a: dict[str, Any], client: OpenAIChatCompletionClient) -> OpenAIChatCompletionClient:
    """The scenario's client, or, for an agent whose model has "vision":
    false, the same client declaring so in its model_info (AgentChat's
    agents then send it images as "<image>")."""
    m = a.get("model")
    if isinstance(m, dict) and m.get("vision") is False:
        config = dict(client._raw_config)
        config["model_info"] = {**client.model_info, "vision": False}
        return OpenAIChatCompletionClient(**config)
    return client


def build_team(
    spec: dict[str, Any],
    client: OpenAIChatCompletionClient,
    tool_results: dict[str, str],
    external: ExternalTermination | None = None,
) -> Any:
    tools = {t["name"]: t for t in spec.get("tools", [])}
    agents = []
    # A team must be told the StructuredMessage types its agents produce
    # (custom_message_types), which its component JSON does not keep.
    custom: list[Any] = []
    for a in spec["agents"]:
        if a["type"] == "team":
            # AgentChat's SocietyOfMindAgent: its inner team built as a
            # chat's team is, with the same model client (which reports
            # multiple_system_messages, as OpenAI's models do, so that the
            # instruction and response prompt are system messages).
            inner = {k: v for k, v in a["team"].items()}
            inner.setdefault("max_round", 10)
            inner["tools"] = spec.get("tools", [])
            som_kwargs: dict[str, Any] = {}
            for k in ("description", "instruction", "response_prompt"):
                if k in a:
                    som_kwargs[k] = a[k]
            agents.append(SocietyOfMindAgent(a["name"], team=build_team(inner, client, tool_results), model_client=client, **som_kwargs))
            continue
        if a["type"] != "assistant":
            raise ValueError("the recorder maps assistants and team agents only")
        kwargs: dict[str, Any] = {}
        if "system_message" in a:
            kwargs["system_message"] = a["system_message"]
        if "description" in a:
            kwargs["description"] = a["description"]
        if "reflect_on_tool_use" in a:
            kwargs["reflect_on_tool_use"] = a["reflect_on_tool_use"]
        if "max_tool_iterations" in a:
            kwargs["max_tool_iterations"] = a["max_tool_iterations"]
        if "tool_call_summary_format" in a:
            kwargs["tool_call_summary_format"] = a["tool_call_summary_format"]
        if "context" in a:
            kwargs["model_context"] = model_context(a["context"], client)
        if "output_schema" in a:
            kwargs["output_content_type"] = output_type(a["output_schema"])
            custom.append(StructuredMessage[kwargs["output_content_type"]])
            if "format_string" in a["output_schema"]:
                kwargs["output_content_type_format"] = a["output_schema"]["format_string"]
        agent: Any = AssistantAgent(
            a["name"],
            model_client=agent_client(a, client),
            tools=[ScriptedTool(tools[n], tool_results.get(n, f"{n} ok")) for n in a.get("tools", [])] or None,
            handoffs=[Handoff(target=h) for h in a.get("handoffs", [])] or None,
            **kwargs,
        )
        if "message_filter" in a:
            # What the agent sees of the messages given to it each turn.
            agent = MessageFilterAgent(
                a["name"], wrapped_agent=agent, filter=MessageFilterConfig.model_validate(a["message_filter"])
            )
        agents.append(agent)
    term = condition(spec["termination"]) if spec.get("termination") else None
    if external is not None:
        # agentd's stop request is AgentChat's ExternalTermination, part of
        # every team's condition.
        term = external if term is None else term | external
    max_turns = spec.get("max_round", 10)
    team_kwargs: dict[str, Any] = {"custom_message_types": custom} if custom else {}
    sel = spec.get("speaker_selection", {})
    method = sel.get("method", "round_robin")
    if method == "round_robin":
        return RoundRobinGroupChat(agents, termination_condition=term, max_turns=max_turns, **team_kwargs)
    if method == "swarm":
        return Swarm(agents, termination_condition=term, max_turns=max_turns, **team_kwargs)
    if method == "auto":
        kwargs = {}
        if "selector_prompt" in sel:
            kwargs["selector_prompt"] = sel["selector_prompt"]
        if "context" in sel:
            kwargs["model_context"] = model_context(sel["context"], client)
        return SelectorGroupChat(
            agents,
            model_client=client,
            termination_condition=term,
            max_turns=max_turns,
            allow_repeated_speaker=sel.get("allow_repeated_speaker", False),
            max_selector_attempts=sel.get("max_attempts", 3),
            **kwargs,
            **team_kwargs,
        )
    if method == "graph":
        # The spec's graph is AgentChat's DiGraph as its component JSON
        # holds it.
        return GraphFlow(
            agents,
            graph=DiGraph.model_validate(sel["graph"]),
            termination_condition=term,
            max_turns=max_turns,
            **team_kwargs,
        )
    if method == "magentic_one":
        return magentic_one(spec, sel, agents, client, term, team_kwargs)
    raise ValueError(f"selection {method} has no recorder mapping")


def magentic_one(
    spec: dict[str, Any],
    sel: dict[str, Any],
    agents: list[Any],
    client: OpenAIChatCompletionClient,
    term: Any,
    team_kwargs: dict[str, Any],
) -> Any:
    """MagenticOneGroupChat for the magentic_one method: the spec's
    assistants as its participants and the selection's model as the
    orchestrator's client (every model of a scenario is the scripted
    server's). max_round is its max_turns (AgentChat's default 20),
    max_stalls and final_answer_prompt its own (defaults 3 and AgentChat's
    prompt)."""
    kwargs: dict[str, Any] = {}
    if "max_stalls" in sel:
        kwargs["max_stalls"] = sel["max_stalls"]
    if "final_answer_prompt" in sel:
        kwargs["final_answer_prompt"] = sel["final_answer_prompt"]
    return MagenticOneGroupChat(
        agents,
        model_client=client,
        termination_condition=term,
        max_turns=spec.get("max_round", 20),
        **kwargs,
        **team_kwargs,
    )


def plain(x: Any) -> Any:
    if isinstance(x, BaseModel):
        return x.model_dump()
    if dataclasses.is_dataclass(x):
        return dataclasses.asdict(x)
    return x


def content(m: Any) -> Any:
    c = m.content
    if isinstance(c, list):
        return [plain(x) for x in c]
    return c


def inner_agents(team: Any) -> dict[str, str]:
    """Each agent of a SocietyOfMindAgent's inner team, mapped to the team
    agent's name: the messages a SocietyOfMindAgent yields from its inner
    team are in the outer transcript, and agentd marks them with team."""
    return {
        q.name: p.name
        for p in getattr(team, "_participants", [])
        if isinstance(p, SocietyOfMindAgent)
        for q in p._team._participants
    }


def transcript(messages: Any, inner: dict[str, str] | None = None) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        e = {"source": m.source, "type": type(m).__name__, "content": content(m)}
        if inner and m.source in inner:
            e["team"] = inner[m.source]
        if isinstance(m, MultiModalMessage):
            # What to_text() shows: the texts, <image> for an image.
            e["content"] = m.to_text()
        if isinstance(m, StructuredMessage):
            # What to_text() shows and the object as model_dump_json writes it.
            e["content"] = m.to_text()
            e["structured"] = m.content.model_dump_json()
        if hasattr(m, "target"):
            e["target"] = m.target
        out.append(e)
    return out


def task_message(m: dict[str, Any]) -> Any:
    """The AgentChat message for a task message of agentd's runs API."""
    if m.get("type") == "TextMessage":
        return TextMessage(source=m.get("source", "user"), content=m["content"])
    if m.get("type") == "HandoffMessage":
        return HandoffMessage(source=m["source"], target=m["target"], content=m["content"])
    if m.get("type") == "MultiModalMessage":
        # An image is {"image": {"data"}} or AgentChat's own {"data"}.
        parts: list[Any] = [
            c if isinstance(c, str) else Image.from_base64(c.get("image", c)["data"]) for c in m["content"]
        ]
        return MultiModalMessage(source=m.get("source", "user"), content=parts)
    raise ValueError(f"task message {m!r} has no recorder mapping")


def task_of(t: Any) -> Any:
    """The task argument of team.run for a run's task: a string, a message,
    a list of messages or none."""
    if t is None or isinstance(t, str):
        return t
    if isinstance(t, list):
        return [task_message(m) for m in t]
    return task_message(t)


async def further_run(team: Any, server: ScriptServer, r: dict[str, Any]) -> dict[str, Any]:
    """Calls team.run once more on the same team, as a further run of agentd's
    chat; "raises" names the exception AgentChat is expected to raise, which
    is recorded (type and message) instead of a result."""
    if "max_round" in r:
        raise ValueError("a run's max_round has no AgentChat equivalent (the team's max_turns only)")
    out: dict[str, Any] = {"first_request": len(server.requests)}
    try:
        result = await team.run(task=task_of(r.get("task")))
    except Exception as e:
        if type(e).__name__ != r.get("raises"):
            raise
        out["error"] = {"type": type(e).__name__, "message": str(e)}
        return out
    if "raises" in r:
        raise RuntimeError(f"the run was to raise {r['raises']}; stop: {result.stop_reason}")
    out["transcript"] = transcript(result.messages, inner_agents(team))
    out["stop_reason"] = result.stop_reason
    return out


def point_clients(v: Any, url: str) -> Any:
    """A team file's model clients with their base URL set to the script
    server's."""
    if isinstance(v, dict):
        out = {k: point_clients(x, url) for k, x in v.items()}
        if out.get("component_type") == "model" and isinstance(out.get("config"), dict):
            out["config"]["base_url"] = url
            out["config"]["api_key"] = "golden"
        return out
    if isinstance(v, list):
        return [point_clients(x, url) for x in v]
    return v


class EchoHandler(BaseHTTPRequestHandler):
    """The REST API of a team's HttpTools: it answers every request with its
    method, path, query and JSON body (keys sorted, compact), so the tool
    results show what the tool sent; golden_test.go's echo answers the
    same way."""

    protocol_version = "HTTP/1.1"

    def answer(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("utf-8") if n else ""
        canon = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")) if body else ""
        path, _, query = self.path.partition("?")
        out = json.dumps({"echo": f"{self.command} {path}?{query} {canon}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = answer

    def log_message(self, *args: Any) -> None:
        pass


async def record_team(scenario: dict[str, Any]) -> dict[str, Any]:
    """A team-file scenario: the file AgentChat dumped, loaded with
    Team.load_component (its FunctionTools run here, in-process) and run on
    the task; "http_echo_port" serves its HttpTools' API there."""
    server = ScriptServer(scenario["script"], {})
    echo = None
    if "http_echo_port" in scenario:
        echo = ThreadingHTTPServer(("127.0.0.1", scenario["http_echo_port"]), EchoHandler)
        threading.Thread(target=echo.serve_forever, daemon=True).start()
    try:
        team = Team.load_component(point_clients(scenario["team"], server.url))
        result = await team.run(task=scenario["task"])
        if server.script:
            raise RuntimeError(f"{len(server.script)} scripted replies left unused; stop: {result.stop_reason}")
        server.check_concurrent()
        return {"requests": server.requests, "transcript": transcript(result.messages, inner_agents(team)), "stop_reason": result.stop_reason}
    finally:
        server.close()
        if echo is not None:
            echo.shutdown()
            echo.server_close()


def concurrent(scenario: dict[str, Any]) -> bool:
    """Whether model requests of the scenario may overlap: a graph's ready
    nodes run concurrently, and a script that addresses or delays replies
    is written for that. Its fixture gets the arrivals, and the requests
    are compared by the rule for concurrent requests (README.md)."""
    script = scenario.get("history_script", []) + scenario["script"]
    return scenario.get("spec", {}).get("speaker_selection", {}).get("method") == "graph" or any(
        "agent" in r or "delay_ms" in r for r in script
    )


async def record(scenario: dict[str, Any]) -> dict[str, Any]:
    if "team" in scenario:
        return await record_team(scenario)
    spec = scenario["spec"]
    server = ScriptServer(scenario.get("history_script", []) + scenario["script"], agent_systems(spec))
    try:
        client = OpenAIChatCompletionClient(model=MODEL, base_url=server.url, api_key="golden")
        stops = any(r.get("stop") for r in scenario.get("history_script", []) + scenario["script"])
        team = build_team(spec, client, scenario.get("tool_results", {}), server.external if stops else None)
        history: list[dict[str, Any]] = []
        if "history_task" in scenario:
            # Prior history: an earlier run of the same team, whose messages
            # the agentd side receives as the spec's "messages".
            first = await team.run(task=scenario["history_task"])
            history = transcript(first.messages)
            if server.script != scenario["script"]:
                raise RuntimeError("the history run did not use exactly history_script")
            server.clear()
        # The spec's task: a text, or (as a run's) a message or a list.
        result = await team.run(task=task_of(spec["task"]))
        runs = [await further_run(team, server, r) for r in scenario.get("runs", [])]
        if server.script:
            raise RuntimeError(f"{len(server.script)} scripted replies left unused; stop: {result.stop_reason}")
        server.check_concurrent()
        out: dict[str, Any] = {}
        if history:
            out["history"] = history
        out["requests"] = server.requests
        if concurrent(scenario):
            out["arrivals"] = server.arrivals
        out["transcript"] = transcript(result.messages, inner_agents(team))
        out["stop_reason"] = result.stop_reason
        if runs:
            out["runs"] = runs
        await client.close()
        return out
    finally:
        server.close()


def main() -> None:
    # The scripted server answers with the model name it was asked for.
    warnings.filterwarnings("ignore", message="Resolved model mismatch")
    *paths, outdir = sys.argv[1:]
    for p in paths:
        with open(p) as f:
            scenario = json.load(f)
        name = os.path.splitext(os.path.basename(p))[0]
        out = asyncio.run(record(scenario))
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump(out, f, indent=1, ensure_ascii=False, sort_keys=True)
            f.write("\n")
        print(f"{name}: {len(out['requests'])} requests, {len(out['transcript'])} messages, stop: {out['stop_reason']}")
        for i, r in enumerate(out.get("runs", []), 2):
            if "error" in r:
                print(f"  run {i}: {r['error']['type']}: {r['error']['message']}")
            else:
                print(f"  run {i}: {len(r['transcript'])} messages, stop: {r['stop_reason']}")


if __name__ == "__main__":
    main()
