"""The AgentChat teams that RemoteTeam is compared on: a round-robin team
with a streaming agent, a Swarm whose agents hand off through tool calls, a
selector team, a team with a human, and teams that run several times (a
round-robin team stopped by MaxMessageTermination in each of three runs, and
a Swarm that hands off to the user and is handed back in the next run, the
human-in-the-loop pattern of AgentChat's Swarm), and a round-robin team
whose agents answer with structured output (pydantic classes as their
output_content_type, one with a format string). Each is built with
AgentChat's own classes around an OpenAIChatCompletionClient pointed at a
scripted model server, and runs the same script in-process (record.py) and
on agentd (check.py).

The Swarm's tool calls are its handoff tools: a team file's other tools
(FunctionTool's Python source, HttpTool, MCP servers) need a sandbox, a REST
API or an MCP server that this check does not set up, see the package README.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional

from autogen_agentchat.agents import AssistantAgent, UserProxyAgent
from autogen_agentchat.conditions import HandoffTermination, MaxMessageTermination, TextMentionTermination
from autogen_agentchat.messages import BaseChatMessage, HandoffMessage, StructuredMessage, TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat, Swarm
from autogen_ext.models.openai import OpenAIChatCompletionClient
from pydantic import BaseModel, Field

MODEL = "gpt-4o-mini"
#: The model clients built so far, to close when a run is over.
CLIENTS: list[OpenAIChatCompletionClient] = []


def client(url: str, stream: bool = False) -> OpenAIChatCompletionClient:
    kwargs: dict[str, Any] = {}
    if stream:
        kwargs["stream_options"] = {"include_usage": True}
    c = OpenAIChatCompletionClient(model=MODEL, base_url=url, api_key="scripted", **kwargs)
    CLIENTS.append(c)
    return c


async def close_clients() -> None:
    while CLIENTS:
        await CLIENTS.pop().close()


def u(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion}


@dataclass
class Scenario:
    name: str
    task: str
    script: list[dict[str, Any]]
    #: Builds the team around a model client for the URL (and the
    #: UserProxyAgent input_func of a scenario with answers).
    build: Callable[..., Any]
    #: The human's answers, in order (a UserProxyAgent's input_func).
    answers: list[str] | None = None
    #: The tasks of the team's further runs (team.run called again), in
    #: agentd's form, which is AgentChat's message dump: a text, a message
    #: ({"type", "source", "content", "target"?}), a list of them, or None.
    runs: list[Any] | None = None


def agentchat_task(task: Any) -> str | BaseChatMessage | list[BaseChatMessage] | None:
    """A further run's task as AgentChat objects."""
    if task is None or isinstance(task, str):
        return task
    if isinstance(task, list):
        return [m for m in (agentchat_task(t) for t in task) if isinstance(m, BaseChatMessage)]
    if task["type"] == "HandoffMessage":
        return HandoffMessage(source=task["source"], target=task["target"], content=task["content"])
    return TextMessage(source=task.get("source", "user"), content=task["content"])


def answering(answers: list[str]) -> Callable[[str], str]:
    """An input_func that gives the answers in order (and again from the
    first after the last: one per run of the scenario)."""
    left = itertools.cycle(answers)

    def answer(prompt: str) -> str:
        return next(left)

    return answer


def round_robin(url: str) -> Any:
    writer = AssistantAgent(
        "writer", model_client=client(url, stream=True), model_client_stream=True,
        system_message="You write release notes.", description="Writes.",
    )
    critic = AssistantAgent("critic", model_client=client(url), system_message="Answer APPROVE when it is good.")
    return RoundRobinGroupChat(
        [writer, critic],
        termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(12),
        max_turns=8,
    )


def swarm(url: str) -> Any:
    triage = AssistantAgent(
        "triage", model_client=client(url), handoffs=["billing"],
        system_message="Route billing questions to billing.",
    )
    billing = AssistantAgent(
        "billing", model_client=client(url), handoffs=["triage"],
        system_message="Answer billing questions, then hand back to triage.",
    )
    return Swarm([triage, billing], termination_condition=TextMentionTermination("TERMINATE"), max_turns=8)


def selector(url: str) -> Any:
    planner = AssistantAgent("planner", model_client=client(url), description="Plans the work.")
    coder = AssistantAgent("coder", model_client=client(url), description="Writes the code.")
    reviewer = AssistantAgent("reviewer", model_client=client(url), description="Reviews the code.")
    return SelectorGroupChat(
        [planner, coder, reviewer], model_client=client(url),
        termination_condition=TextMentionTermination("TERMINATE"), max_turns=6,
    )


def human(url: str, input_func: Callable[[str], str] | None = None) -> Any:
    writer = AssistantAgent("writer", model_client=client(url), system_message="You draft one-line notes.")
    editor = UserProxyAgent("editor", input_func=input_func)
    return RoundRobinGroupChat(
        [writer, editor], termination_condition=TextMentionTermination("SHIP", sources=["editor"]), max_turns=6,
    )


class Plan(BaseModel):
    """The planner's output_content_type."""

    title: str
    steps: list[str]
    priority: int
    note: Optional[str] = Field(default=None, description="Anything else.")


class Verdict(BaseModel):
    """The reviewer's output_content_type (no format string: its text is the
    object's JSON)."""

    verdict: Literal["APPROVED", "REJECTED"]
    score: float
    done: bool = False


def structured(url: str) -> Any:
    planner = AssistantAgent(
        "planner", model_client=client(url), system_message="Plan the work.",
        output_content_type=Plan, output_content_type_format="{title} (priority {priority}): {steps}",
    )
    reviewer = AssistantAgent("reviewer", model_client=client(url), output_content_type=Verdict)
    writer = AssistantAgent("writer", model_client=client(url), system_message="Announce the plan.")
    return RoundRobinGroupChat(
        [planner, reviewer, writer], termination_condition=MaxMessageTermination(4),
        custom_message_types=[StructuredMessage[Plan], StructuredMessage[Verdict]],
    )


def runs_round_robin(url: str) -> Any:
    counter = AssistantAgent(
        "counter", model_client=client(url, stream=True), model_client_stream=True,
        system_message="You count.", description="Counts.",
    )
    checker = AssistantAgent("checker", model_client=client(url), system_message="You check the count.")
    scribe = AssistantAgent("scribe", model_client=client(url), system_message="You write the count down.")
    return RoundRobinGroupChat([counter, checker, scribe], termination_condition=MaxMessageTermination(3))


def runs_swarm(url: str) -> Any:
    triage = AssistantAgent(
        "triage", model_client=client(url), handoffs=["billing", "user"],
        system_message="You route customer requests; ask the user when you need to know more.",
    )
    billing = AssistantAgent(
        "billing", model_client=client(url), handoffs=["triage", "user"],
        system_message="You handle refunds; ask the user before you finish.",
    )
    return Swarm(
        [triage, billing],
        termination_condition=HandoffTermination(target="user") | TextMentionTermination("TERMINATE"),
    )


SCENARIOS = [
    Scenario(
        "round_robin",
        "Write a release note for the log rotation fix.",
        [
            # The writer's replies come after a pause, so that agentd streams
            # their deltas to a stream that is open while they are made.
            {"content": "Log files now rotate at midnight, local time, without losing lines.", "usage": u(31, 14),
             "delay_ms": 400},
            {"content": "Say which version.", "usage": u(40, 4)},
            {"content": "From 1.4, log files rotate at midnight without losing lines.", "usage": u(52, 12),
             "delay_ms": 400},
            {"content": "APPROVE", "usage": u(60, 1)},
        ],
        round_robin,
    ),
    Scenario(
        "swarm",
        "Was my last invoice paid?",
        [
            {"content": "A billing question: passing you on.",
             "tool_calls": [{"id": "call_t1", "name": "transfer_to_billing", "arguments": "{}"}], "usage": u(20, 9)},
            {"tool_calls": [{"id": "call_b1", "name": "transfer_to_triage", "arguments": "{}"}], "usage": u(33, 6)},
            {"content": "Your invoice was paid on the 3rd. TERMINATE", "usage": u(41, 11)},
        ],
        swarm,
    ),
    Scenario(
        "selector",
        "Add a --version flag to the CLI.",
        [
            {"content": "planner"},
            {"content": "Plan: parse the flag, print the version, exit 0.", "usage": u(25, 12)},
            {"content": "coder or reviewer"},
            {"content": "coder"},
            {"content": "```go\nif *version { fmt.Println(v); return }\n```", "usage": u(44, 15)},
            {"content": "reviewer"},
            {"content": "Looks right. TERMINATE", "usage": u(60, 5)},
        ],
        selector,
    ),
    Scenario(
        "human",
        "Draft a one-line note on the new --version flag.",
        [
            {"content": "The CLI has a --version flag.", "usage": u(18, 8)},
            {"content": "New: --version prints the version and exits.", "usage": u(30, 10)},
        ],
        human,
        answers=["Say what it prints.", "SHIP it."],
    ),
    Scenario(
        "runs_round_robin",
        "Count to three, one number each.",
        [
            # Run 1: the task, then two replies make three messages.
            {"content": "One, to start the count.", "usage": u(12, 6), "delay_ms": 300},
            {"content": "Two.", "usage": u(20, 2)},
            # Run 2 (a task from someone else than the user): two replies.
            {"content": "Three, so backwards: three.", "usage": u(30, 6)},
            {"content": "Two, going backwards.", "usage": u(36, 5), "delay_ms": 300},
            # Run 3 (no task): three replies, where the round robin left off.
            {"content": "One.", "usage": u(44, 2)},
            {"content": "Zero? No: done.", "usage": u(50, 5)},
            {"content": "Counted both ways.", "usage": u(58, 4), "delay_ms": 300},
        ],
        runs_round_robin,
        runs=[{"type": "TextMessage", "source": "pm", "content": "Now count backwards."}, None],
    ),
    Scenario(
        "runs_swarm",
        "I was charged twice.",
        [
            # Run 1: triage asks the user, which ends the run.
            {"content": "Which invoice was it?",
             "tool_calls": [{"id": "call_u1", "name": "transfer_to_user", "arguments": "{}"}], "usage": u(21, 9)},
            # Run 2: the user answers triage, which hands off to billing,
            # which asks the user again.
            {"tool_calls": [{"id": "call_b1", "name": "transfer_to_billing", "arguments": "{}"}], "usage": u(48, 5)},
            {"content": "Invoice 42 is refunded. Anything else?",
             "tool_calls": [{"id": "call_u2", "name": "transfer_to_user", "arguments": "{}"}], "usage": u(66, 12)},
            # Run 3: the user answers billing, which is done.
            {"content": "Glad to help. TERMINATE", "usage": u(80, 6)},
        ],
        runs_swarm,
        runs=[
            {"type": "HandoffMessage", "source": "user", "target": "triage", "content": "Invoice 42."},
            {"type": "HandoffMessage", "source": "user", "target": "billing", "content": "No, that is all. Thanks!"},
        ],
    ),
    Scenario(
        "structured",
        "Plan the log rotation fix.",
        [
            # The model's JSON, as lax pydantic reads it: "2" is the integer 2,
            # a member that is no field is dropped, a missing one defaulted.
            {"content": '{"title": "Rotate logs", "steps": ["rename", "reopen"], "priority": "2", "extra": 1}',
             "usage": u(30, 20)},
            {"content": '{"verdict": "APPROVED", "score": 1}', "usage": u(45, 9)},
            {"content": "Logs will rotate: rename, then reopen.", "usage": u(60, 9)},
        ],
        structured,
    ),
]
