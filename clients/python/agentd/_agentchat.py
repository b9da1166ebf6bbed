"""agentd's events as AgentChat 0.7.5 messages, without importing AgentChat.

:class:`Translator` reads a chat's events and produces, for each, the
AgentChat messages and events that AgentChat itself would have yielded for
the same turn, as the dicts that AgentChat's ``model_dump(mode="json")``
writes (less ``id`` and ``created_at``, which are AgentChat's to make).
:mod:`agentd.autogen` turns them into AgentChat objects; tests compare them
with recorded AgentChat runs without AgentChat installed.

Where agentd's log represents a turn differently from AgentChat (README,
"Differences from AutoGen"), this is where the difference is undone:

- a reply's text that came with tool calls is one ``ToolCallRequestEvent`` in
  agentd; AgentChat yields it as a ``ThoughtEvent`` first;
- a tool result in agentd names no function; AgentChat's
  ``FunctionExecutionResult`` carries the name of the call it answers;
- a ``ToolCallSummaryMessage`` carries the turn's calls and results, and a
  ``HandoffMessage`` the context AgentChat hands to the target (the turn's
  other tool calls and their results, or the reply's text);
- token deltas (``message.delta``) are ``ModelClientStreamingChunkEvent`` for
  the agents whose ``model_client_stream`` is on, as in AgentChat. Deltas are
  ephemeral, so a stream may miss some (a reconnect, a reply faster than
  the stream); what is missing of a reply is made up from its message, so the
  chunks of a reply always add up to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ._sse import Event

#: AgentChat's stop reason is agentd's stop_detail; these statuses end a run.
ENDED = ("completed", "failed", "cancelled")


@dataclass
class RunEnd:
    """How a run ended: ``status`` (completed, failed or cancelled), the stop
    reason AgentChat's TaskResult would carry, and the error of a failure."""

    status: str
    stop_reason: str | None
    error: str | None = None


@dataclass
class _Turn:
    """What the messages of the turn in progress need from its earlier ones."""

    source: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    thought: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)


def _base(source: str, type_: str, usage: Any = None) -> dict[str, Any]:
    models_usage = None
    if isinstance(usage, Mapping):
        models_usage = {
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": int(usage.get("completion_tokens", 0)),
        }
    return {"source": source, "models_usage": models_usage, "metadata": {}, "type": type_}


@dataclass(frozen=True)
class StructuredType:
    """An agent's structured output, as its component's
    StructuredMessageFactory holds it: the content model's name, its format
    string and its JSON Schema."""

    name: str
    format_string: str | None = None
    json_schema: Mapping[str, Any] | None = None

    @property
    def message_type(self) -> str:
        """AgentChat's name of the agent's message class."""
        return f"StructuredMessage[{self.name}]"


def _participants(component: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The configs of a team component's agents that have a name."""
    config = component.get("config")
    participants = config.get("participants", []) if isinstance(config, Mapping) else []
    out = []
    for p in participants if isinstance(participants, list) else []:
        cfg = p.get("config") if isinstance(p, Mapping) else None
        if isinstance(cfg, Mapping) and isinstance(cfg.get("name"), str):
            out.append(cfg)
    return out


def structured_types(component: Mapping[str, Any]) -> dict[str, StructuredType]:
    """From a team component: each structured-output agent's type (its
    ``structured_message_factory``)."""
    out: dict[str, StructuredType] = {}
    for cfg in _participants(component):
        factory = cfg.get("structured_message_factory")
        fc = factory.get("config") if isinstance(factory, Mapping) else None
        if not isinstance(fc, Mapping) or not isinstance(fc.get("content_model_name"), str):
            continue
        fmt = fc.get("format_string")
        schema = fc.get("json_schema")
        out[cfg["name"]] = StructuredType(fc["content_model_name"], fmt if isinstance(fmt, str) else None,
                                          schema if isinstance(schema, Mapping) else None)
    return out


def team_facts(component: Mapping[str, Any]) -> tuple[set[str], dict[str, set[str]]]:
    """From a team component: the agents that stream their model's output
    (``model_client_stream``) and each agent's handoff tool names."""
    streaming: set[str] = set()
    handoffs: dict[str, set[str]] = {}
    for cfg in _participants(component):
        name = cfg["name"]
        if cfg.get("model_client_stream"):
            streaming.add(name)
        names = set()
        for h in cfg.get("handoffs") or []:
            if isinstance(h, str):
                names.add(f"transfer_to_{h}")
            elif isinstance(h, Mapping):
                if isinstance(h.get("name"), str):
                    names.add(h["name"])
                elif isinstance(h.get("target"), str):
                    names.add(f"transfer_to_{h['target']}")
        handoffs[name] = names
    return streaming, handoffs


class Translator:
    """Turns the events of one run into AgentChat message dicts.

    ``streaming``: the agents whose deltas become chunk events;
    ``handoffs``: each agent's handoff tool names (a call named
    ``transfer_to_…`` counts as one for agents not listed);
    ``output_task_messages``: whether the run's task messages are output, as
    AgentChat's ``run_stream`` argument of that name; ``run``: the number of
    the run to translate, whose ``run.started`` opens it (events before it
    belong to other runs and give nothing), and whose terminal event ends it
    (default: the events from the start, to the first terminal event);
    ``structured``: the structured-output agents' types (an agent not listed
    gives a plain ``StructuredMessage`` without a format string).
    """

    def __init__(
        self,
        streaming: set[str] | None = None,
        handoffs: Mapping[str, set[str]] | None = None,
        output_task_messages: bool = True,
        run: int | None = None,
        structured: Mapping[str, StructuredType] | None = None,
    ) -> None:
        self.structured = dict(structured or {})
        self.streaming = set(streaming or ())
        self.handoffs = dict(handoffs or {})
        self.output_task_messages = output_task_messages
        self.run = run
        self.end: RunEnd | None = None
        self._turn = _Turn()
        self._deltas: dict[str, str] = {}
        # Whether the run is under way (its run.started seen), and whether
        # its first turn has begun: messages before it are the task's.
        self._open = run is None
        self._started = False

    @property
    def in_run(self) -> bool:
        """Whether the events fed so far have opened the run and not ended it."""
        return self._open and self.end is None

    def feed(self, ev: Event) -> list[dict[str, Any]]:
        """The AgentChat messages for one event (often none); sets
        :attr:`end` at the run's terminal event."""
        data = ev.data if isinstance(ev.data, Mapping) else {}
        if ev.event == "run.started":
            if self.run is None or ev.run == self.run:
                self._open, self._started = True, False
            return []
        if not self.in_run:
            return []
        if ev.event == "message":
            return self._message(data)
        if ev.event == "message.delta":
            return self._delta(data)
        if ev.event == "speaker.selected":
            self._started = True
            self._turn = _Turn(source=str(data.get("agent", "")))
            return []
        if ev.event == "input.requested" and data.get("kind") == "message":
            out = _base(str(data.get("agent", "")), "UserInputRequestedEvent")
            out.update(request_id=str(data.get("request_id", "")), content="")
            return [out]
        if ev.terminal:
            status = str(data.get("status", ev.event.removeprefix("chat.")))
            self.end = RunEnd(status, data.get("stop_detail"), data.get("error"))
        return []

    def _is_handoff(self, source: str, name: str) -> bool:
        names = self.handoffs.get(source)
        if names is not None:
            return name in names
        return name.startswith("transfer_to_")

    def _chunks(self, source: str, text: str) -> list[dict[str, Any]]:
        """The chunk that completes a streamed reply's text, when the stream
        missed some of its deltas."""
        if source not in self.streaming:
            return []
        seen = self._deltas.pop(source, "")
        if not text or seen == text or not text.startswith(seen):
            return []
        out = _base(source, "ModelClientStreamingChunkEvent")
        out.update(content=text[len(seen):], full_message_id=None)
        return [out]

    def _delta(self, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        source = str(data.get("name", ""))
        if source not in self.streaming:
            return []
        if data.get("reset"):
            self._deltas.pop(source, None)
            return []
        text = str(data.get("content", ""))
        if not text:
            return []
        self._deltas[source] = self._deltas.get(source, "") + text
        out = _base(source, "ModelClientStreamingChunkEvent")
        out.update(content=text, full_message_id=None)
        return [out]

    def _message(self, m: Mapping[str, Any]) -> list[dict[str, Any]]:
        source = str(m.get("name", ""))
        type_ = str(m.get("type") or "TextMessage")
        content = m.get("content", "")
        if not self._started:
            # The run's task (the messages before its first turn): output as
            # AgentChat does, or not at all.
            if not self.output_task_messages:
                return []
            out = _base(source, type_)
            out["content"] = content
            if type_ == "HandoffMessage":
                out.update(target=str(m.get("handoff", "")), context=[])
            return [out]
        model_reply = m.get("role") == "assistant"
        thought = m.get("thought") or None
        if type_ == "ToolCallRequestEvent":
            return self._tool_calls(m, source, str(content or "") or thought)
        if type_ == "ToolCallExecutionEvent":
            return self._tool_results(m, source)
        if type_ == "ToolCallSummaryMessage":
            out = _base(source, type_)
            pairs = self._normal_pairs(source)
            out.update(content=content, tool_calls=[c for c, _ in pairs], results=[r for _, r in pairs])
            return [out]
        if type_ == "HandoffMessage":
            return [self._handoff(m, source)]
        msgs: list[dict[str, Any]] = []
        if model_reply and not type_.startswith("StructuredMessage"):
            # A structured reply's chunks are the model's JSON, which agentd
            # keeps in no message: only its deltas give them.
            msgs += self._chunks(source, str(thought or "") + str(content or ""))
        elif model_reply:
            self._deltas.pop(source, None)
        if thought:
            t = _base(source, "ThoughtEvent")
            t["content"] = thought
            msgs.append(t)
        if type_.startswith("StructuredMessage"):
            st = self.structured.get(source)
            out = _base(source, st.message_type if st else type_, m.get("usage") if model_reply else None)
            out.update(content=m.get("structured"), format_string=st.format_string if st else None)
            msgs.append(out)
            return msgs
        out = _base(source, type_, m.get("usage") if model_reply else None)
        out["content"] = content
        msgs.append(out)
        return msgs

    def _tool_calls(self, m: Mapping[str, Any], source: str, thought: str | None) -> list[dict[str, Any]]:
        calls = []
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            calls.append({"id": str(c.get("id", "")), "arguments": str(fn.get("arguments", "")),
                          "name": str(fn.get("name", ""))})
        self._turn = _Turn(source=source, calls=calls, thought=thought)
        msgs = self._chunks(source, thought or "")
        if thought:
            t = _base(source, "ThoughtEvent")
            t["content"] = thought
            msgs.append(t)
        out = _base(source, "ToolCallRequestEvent", m.get("usage"))
        out["content"] = calls
        msgs.append(out)
        return msgs

    def _tool_results(self, m: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
        names = {c["id"]: c["name"] for c in self._turn.calls}
        results = []
        for r in m.get("tool_responses") or []:
            call_id = str(r.get("tool_call_id", ""))
            results.append({"content": str(r.get("content", "")), "name": names.get(call_id, ""),
                            "call_id": call_id, "is_error": bool(r.get("is_error", False))})
        self._turn.results = results
        out = _base(source, "ToolCallExecutionEvent")
        out["content"] = results
        return [out]

    def _normal_pairs(self, source: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The turn's last calls that are not handoffs, with their results."""
        by_id = {r["call_id"]: r for r in self._turn.results}
        return [(c, by_id[c["id"]]) for c in self._turn.calls
                if c["id"] in by_id and not self._is_handoff(source, c["name"])]

    def _handoff(self, m: Mapping[str, Any], source: str) -> dict[str, Any]:
        context: list[dict[str, Any]] = []
        if self._turn.source == source and self._turn.calls:
            pairs = self._normal_pairs(source)
            if pairs:
                context.append({"content": [c for c, _ in pairs], "thought": self._turn.thought,
                                "source": source, "type": "AssistantMessage"})
                context.append({"content": [r for _, r in pairs], "type": "FunctionExecutionResultMessage"})
            elif self._turn.thought:
                context.append({"content": self._turn.thought, "thought": None, "source": source,
                                "type": "AssistantMessage"})
        out = _base(source, "HandoffMessage")
        out.update(content=m.get("content", ""), target=str(m.get("handoff", "")), context=context)
        return out
