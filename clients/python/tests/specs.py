"""Chat specs of the tests (replay models: no network)."""

from __future__ import annotations

from typing import Any


def debate(task: str = "Is Go a good fit for servers?", delay_ms: int = 0, cycles: int = 1) -> dict[str, Any]:
    """Three agents in round robin, each speaking cycles times, until the
    judge's last reply says TERMINATE."""

    def replies(name: str, n: int, last: str) -> list[Any]:
        out: list[Any] = [{"content": f"{name} says point {i}.", "delay_ms": delay_ms} for i in range(1, n)]
        out.append({"content": last, "delay_ms": delay_ms})
        return out

    n = cycles
    return {
        "name": "debate",
        "task": task,
        "agents": [
            {"name": "pro", "type": "assistant",
             "model": {"provider": "replay", "responses": replies("pro", n, "pro rests.")}},
            {"name": "con", "type": "assistant",
             "model": {"provider": "replay", "responses": replies("con", n, "con rests.")}},
            {"name": "judge", "type": "assistant",
             "model": {"provider": "replay", "responses": replies("judge", n, "Verdict: yes. TERMINATE")}},
        ],
        "max_round": 3 * cycles + 1,
        "termination": {"text_mention": {"text": "TERMINATE"}},
    }


def manual() -> dict[str, Any]:
    """A chat whose every speaker is picked over POST /input."""
    return {
        "name": "manual",
        "task": "Name a colour, then a fruit of that colour.",
        "agents": [
            {"name": "colours", "type": "assistant",
             "model": {"provider": "replay", "responses": ["Yellow.", "Purple."]}},
            {"name": "fruits", "type": "assistant",
             "model": {"provider": "replay", "responses": ["A banana.", "A plum."]}},
        ],
        "speaker_selection": {"method": "manual"},
        "max_round": 2,
    }


def human() -> dict[str, Any]:
    """A writer and an editor whose human answers every draft."""
    return {
        "name": "human",
        "task": "Draft a one-line release note.",
        "agents": [
            {"name": "writer", "type": "assistant",
             "model": {"provider": "replay", "responses": ["Draft 1.", "Draft 2."]}},
            {"name": "editor", "type": "user_proxy", "human_input_mode": "ALWAYS"},
        ],
        "max_round": 4,
    }


def slow(delay_ms: int = 60000) -> dict[str, Any]:
    """A chat whose one reply takes delay_ms."""
    return {
        "name": "slow",
        "task": "Take your time.",
        "agents": [{"name": "sloth", "type": "assistant",
                    "model": {"provider": "replay", "responses": [{"content": "Done.", "delay_ms": delay_ms}]}}],
        "max_round": 1,
    }


def one_agent(replies: list[Any], task: str = "go", max_round: int = 1) -> dict[str, Any]:
    """One assistant whose replay replies (texts, or objects with
    ``delay_ms``) are consumed one a turn, over every run of the chat."""
    return {
        "name": "one-agent",
        "task": task,
        "max_round": max_round,
        "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": replies}}],
    }


def model_agent(task: str = "go", max_round: int = 1) -> dict[str, Any]:
    """One assistant on the server's OpenAI endpoint (a scripted model)."""
    return {
        "name": "model-agent",
        "task": task,
        "max_round": max_round,
        "agents": [{"name": "a", "type": "assistant", "model": {"provider": "openai", "model": "gpt-4o-mini"}}],
    }


def pay_and_refund(tool_url: str, approval: Any = "always") -> dict[str, Any]:
    """An assistant whose tools pay and refund (http tools at tool_url, each
    taking an integer n) are held for approval; its first reply calls pay,
    its second pay and refund."""

    def tool(name: str) -> dict[str, Any]:
        return {"name": name, "description": f"{name.title()} n euros.",
                "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                "implementation": {"type": "http", "url": tool_url}}

    return {
        "name": "approvals",
        "task": "Pay the invoice, then settle the dispute.",
        "max_round": 2,
        "tools": [tool("pay"), tool("refund")],
        "agents": [{
            "name": "clerk", "type": "assistant", "tools": ["pay", "refund"], "tool_approval": approval,
            "tool_call_summary_format": "{tool_name}: {result}",
            "model": {"provider": "replay", "responses": [
                {"tool_calls": [{"name": "pay", "arguments": {"n": 100}}]},
                {"tool_calls": [{"name": "pay", "arguments": {"n": 100}}, {"name": "refund", "arguments": {"n": 5}}]},
            ]},
        }],
    }


def structured() -> dict[str, Any]:
    """A planner with structured output (a format string) and a writer."""
    return {
        "name": "structured",
        "task": "Plan the log rotation fix.",
        "max_round": 2,
        "agents": [
            {"name": "planner", "type": "assistant",
             "output_schema": {
                 "name": "Plan", "format_string": "{title} (priority {priority}): {steps}",
                 "schema": {"type": "object", "title": "Plan", "required": ["title", "steps", "priority"],
                            "properties": {"title": {"type": "string"},
                                           "steps": {"type": "array", "items": {"type": "string"}},
                                           "priority": {"type": "integer"},
                                           "note": {"anyOf": [{"type": "string"}, {"type": "null"}],
                                                    "default": None}}}},
             "model": {"provider": "replay", "responses": [
                 '{"title": "Rotate logs", "steps": ["rename", "reopen"], "priority": "2"}']}},
            {"name": "writer", "type": "assistant",
             "model": {"provider": "replay", "responses": ["Logs will rotate."]}},
        ],
    }
