"""Builds AgentChat 0.7.5 teams and dumps them with dump_component(): the
fixtures of agentd's team-component translation (internal/component/testdata).

Run it from the repository root in the AgentChat environment (see README.md):

    /work/autogen-env/python.sh e2e/autogen/components/dump.py internal/component/testdata examples/agentchat-team.json

It writes testdata/agentchat/<name>.json for every team below,
testdata/runs/<name>.json with the messages and stop reason of a real
AgentChat run of the replay-driven teams, testdata/graph_errors.json with the
message DiGraph.graph_validate gives for each graph in BAD_GRAPHS, and the
example team (examples/agentchat-team.json, shown in docs/autogen.md). Nothing here talks to a network,
a container engine or a model: model clients are ReplayChatCompletionClient
or never called, and executors are never started.
"""

import asyncio
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stubs  # noqa: E402

stubs.install()

from autogen_agentchat.agents import AssistantAgent, CodeExecutorAgent, MessageFilterAgent, SocietyOfMindAgent, UserProxyAgent  # noqa: E402
from autogen_agentchat.agents._message_filter_agent import MessageFilterConfig, PerSourceFilter  # noqa: E402
from autogen_agentchat.base import Handoff, TerminationCondition  # noqa: E402
from autogen_agentchat.conditions import (  # noqa: E402
    ExternalTermination,
    FunctionCallTermination,
    HandoffTermination,
    MaxMessageTermination,
    SourceMatchTermination,
    StopMessageTermination,
    TextMentionTermination,
    TextMessageTermination,
    TimeoutTermination,
    TokenUsageTermination,
)
from autogen_agentchat.messages import StopMessage, StructuredMessage  # noqa: E402
from autogen_agentchat.tools import AgentTool  # noqa: E402
from autogen_agentchat.teams import DiGraph, DiGraphBuilder, GraphFlow, MagenticOneGroupChat, RoundRobinGroupChat, SelectorGroupChat, Swarm  # noqa: E402
from autogen_core import Component  # noqa: E402
from autogen_core.model_context import (  # noqa: E402
    BufferedChatCompletionContext,
    HeadAndTailChatCompletionContext,
    TokenLimitedChatCompletionContext,
)
from autogen_core.models import CreateResult, ModelInfo, RequestUsage  # noqa: E402
from autogen_core import FunctionCall  # noqa: E402
from autogen_ext.code_executors.docker import DockerCommandLineCodeExecutor  # noqa: E402
from autogen_ext.code_executors.local import LocalCommandLineCodeExecutor  # noqa: E402
from autogen_ext.models.anthropic import AnthropicChatCompletionClient  # noqa: E402
from autogen_ext.models.openai import AzureOpenAIChatCompletionClient, OpenAIChatCompletionClient  # noqa: E402
from autogen_ext.models.replay import ReplayChatCompletionClient  # noqa: E402
from autogen_ext.tools.code_execution import PythonCodeExecutionTool  # noqa: E402
from autogen_core.code_executor import ImportFromModule  # noqa: E402
from autogen_core.tools import FunctionTool  # noqa: E402
from typing import Annotated, Literal, Optional  # noqa: E402
from autogen_ext.tools.mcp import McpWorkbench, SseServerParams, StdioServerParams, StreamableHttpServerParams  # noqa: E402
from autogen_ext.tools.http import HttpTool  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else "internal/component/testdata"

# The OpenAI clients need a key to be built; it is never used (and the dump
# shows how a key in a file looks: agentd ignores it).
os.environ.setdefault("OPENAI_API_KEY", "sk-not-used")

TOOLS = ModelInfo(vision=False, function_calling=True, json_output=False, family="unknown", structured_output=False)


def replay(*items):
    return ReplayChatCompletionClient(list(items), model_info=TOOLS)


def call(name, arguments="{}", thought=None):
    return CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="call_1", arguments=arguments, name=name)],
        usage=RequestUsage(prompt_tokens=10, completion_tokens=5),
        cached=False,
        thought=thought,
    )


class CustomTerminationConfig(BaseModel):
    pass


class CustomTermination(TerminationCondition, Component[CustomTerminationConfig]):
    """A user-defined condition: its provider names this script's module."""

    component_config_schema = CustomTerminationConfig

    @property
    def terminated(self):
        return False

    async def __call__(self, messages):
        return None

    async def reset(self):
        pass

    def _to_config(self):
        return CustomTerminationConfig()

    @classmethod
    def _from_config(cls, config):
        return cls()


def round_robin():
    writer = AssistantAgent(
        "writer",
        model_client=replay("Roses are red.", "Roses are red,\nviolets are blue. DONE"),
        system_message="You write short poems.",
        description="Writes poems.",
    )
    critic = AssistantAgent(
        "critic",
        model_client=replay("Add a second line."),
        system_message="You critique poems.",
        description="Critiques poems.",
    )
    return RoundRobinGroupChat(
        [writer, critic],
        termination_condition=TextMentionTermination("DONE") | MaxMessageTermination(10),
        max_turns=6,
    ), "Write a two-line poem."


def selector():
    planner = AssistantAgent("planner", model_client=replay("Plan: write, then review."), description="Plans the work.")
    coder = AssistantAgent("coder", model_client=replay("def rev(s): return s[::-1]"), description="Writes Python.")
    reviewer = AssistantAgent("reviewer", model_client=replay("Looks right. TERMINATE"), description="Reviews code.")
    team = SelectorGroupChat(
        [planner, coder, reviewer],
        model_client=replay("planner", "coder", "reviewer"),
        termination_condition=TextMentionTermination("TERMINATE") | MaxMessageTermination(8),
        max_turns=5,
        selector_prompt="Pick the next role from {participants}.\n{roles}\n\n{history}\n",
        allow_repeated_speaker=True,
        max_selector_attempts=2,
    )
    return team, "Write a function that reverses a string."


def swarm():
    triage = AssistantAgent(
        "triage",
        model_client=replay(call("transfer_to_billing")),
        handoffs=["billing", Handoff(target="refunds", description="Handoff to refunds.")],
        system_message="You route customer requests.",
    )
    billing = AssistantAgent(
        "billing", model_client=replay("Your invoice is paid. TERMINATE"), handoffs=["triage"], system_message="You answer billing questions."
    )
    refunds = AssistantAgent("refunds", model_client=replay("Refunded."), handoffs=["triage"])
    return Swarm(
        [triage, billing, refunds],
        termination_condition=TextMentionTermination("TERMINATE") | HandoffTermination("refunds"),
        max_turns=8,
    ), "Is my invoice paid?"


def assistant_options():
    analyst = AssistantAgent(
        "analyst",
        model_client=OpenAIChatCompletionClient(
            model="gpt-4o-mini",
            api_key="sk-in-the-file",
            base_url="https://models.example.invalid/v1",
            temperature=0.2,
            top_p=0.9,
            max_tokens=256,
            seed=7,
            parallel_tool_calls=False,
            stop=["END"],
            frequency_penalty=0.5,
            presence_penalty=-0.25,
            reasoning_effort="low",
        ),
        workbench=McpWorkbench(StreamableHttpServerParams(url="http://127.0.0.1:9/mcp", timeout=20)),
        model_context=BufferedChatCompletionContext(buffer_size=5),
        system_message=None,
        description="Looks things up.",
        reflect_on_tool_use=True,
        tool_call_summary_format="{tool_name}: {result}",
        max_tool_iterations=3,
    )
    writer = AssistantAgent(
        "writer",
        model_client=AzureOpenAIChatCompletionClient(
            model="gpt-4o",
            azure_deployment="gpt4o-prod",
            azure_endpoint="https://example.openai.azure.com",
            api_version="2024-06-01",
            api_key="azure-key-in-the-file",
        ),
        system_message="You write the answer.",
    )
    return RoundRobinGroupChat([analyst, writer], termination_condition=TextMentionTermination("TERMINATE"), max_turns=4), None


def example():
    """examples/agentchat-team.json: a coder and a reviewer taking turns."""
    coder = AssistantAgent(
        "coder",
        model_client=replay(
            "```python\ndef reverse(s):\n    return s[::-1]\n```",
            "```python\ndef reverse(s):\n    return s[::-1]\n\nassert reverse(\"abc\") == \"cba\"\n```",
        ),
        description="Writes Python code.",
        system_message="You write Python in ```python blocks.",
    )
    reviewer = AssistantAgent(
        "reviewer",
        model_client=replay("Add a test.", "Looks good. APPROVE"),
        description="Reviews code.",
        system_message="You review code. Reply APPROVE when it is good.",
    )
    return RoundRobinGroupChat(
        [coder, reviewer],
        name="code-review",
        termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(10),
        max_turns=6,
    ), "Write a function that reverses a string, with a test."


def openai_client():
    """An OpenAI client with a key and endpoint in the file: agentd ignores
    both and calls its own configured endpoint with its own key."""
    reviewer = AssistantAgent(
        "reviewer",
        model_client=OpenAIChatCompletionClient(
            model="gpt-4o-mini", api_key="sk-in-the-file", base_url="https://models.example.invalid/v1", temperature=0
        ),
        system_message="You review code. Say APPROVED when it is right.",
    )
    return RoundRobinGroupChat([reviewer], termination_condition=TextMentionTermination("APPROVED"), max_turns=3), None


def azure_client():
    """The same with an Azure OpenAI client: its endpoint, deployment, API
    version and key are the server's business too."""
    reviewer = AssistantAgent(
        "reviewer",
        model_client=AzureOpenAIChatCompletionClient(
            model="gpt-4o-mini",
            azure_deployment="review-prod",
            azure_endpoint="https://example.openai.azure.com",
            api_version="2024-06-01",
            api_key="azure-key-in-the-file",
            temperature=0,
        ),
        system_message="You review code. Say APPROVED when it is right.",
    )
    return RoundRobinGroupChat([reviewer], termination_condition=TextMentionTermination("APPROVED"), max_turns=3), None


def anthropic_client():
    """An Anthropic client with a key in the file and extended thinking:
    agentd maps it onto its own anthropic endpoint, never uses the file's
    key, and keeps the thinking setting."""
    info = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown", "structured_output": False}
    reviewer = AssistantAgent(
        "reviewer",
        model_client=AnthropicChatCompletionClient(
            model="claude-sonnet-4-5",
            api_key="sk-ant-in-the-file",
            max_tokens=2048,
            stop_sequences=["DONE"],
            thinking={"type": "enabled", "budget_tokens": 1024},
            model_info=info,
        ),
        system_message="You review code. Say APPROVED when it is right.",
    )
    return RoundRobinGroupChat([reviewer], termination_condition=TextMentionTermination("APPROVED"), max_turns=3), None


def human():
    assistant = AssistantAgent("assistant", model_client=replay("Here is a draft.", "Revised. APPROVE"))
    user = UserProxyAgent("reviewer", description="A human who approves drafts.")
    return RoundRobinGroupChat(
        [assistant, user], termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(6)
    ), None


def code_executor():
    coder = AssistantAgent("coder", model_client=replay("```python\nprint(6 * 7)\n```"), system_message="You write Python in ```python blocks.")
    executor = CodeExecutorAgent(
        "executor",
        code_executor=DockerCommandLineCodeExecutor(timeout=30, container_name="agentd-fixture"),
        supported_languages=["python", "sh"],
    )
    return RoundRobinGroupChat([coder, executor], termination_condition=MaxMessageTermination(3), max_turns=4), "Print 6 times 7."


def terminations():
    """Every termination condition of AgentChat 0.7.5 that agentd maps, with | and &."""
    lead = AssistantAgent(
        "lead",
        model_client=replay("Working on it."),
        workbench=McpWorkbench(StreamableHttpServerParams(url="http://127.0.0.1:9/mcp")),
        handoffs=["helper"],
    )
    helper = AssistantAgent("helper", model_client=replay("Done."), handoffs=["lead"])
    cond = (
        MaxMessageTermination(20)
        | TextMentionTermination("TERMINATE")
        | TokenUsageTermination(max_total_token=5000, max_prompt_token=4000, max_completion_token=1000)
        | HandoffTermination("helper")
        | TimeoutTermination(120.5)
        | SourceMatchTermination(["helper"])
        | FunctionCallTermination("lookup")
        | StopMessageTermination()
        | ExternalTermination()
        | (MaxMessageTermination(4) & TextMentionTermination("DONE"))
        | TextMessageTermination("helper")
        | TextMessageTermination()
        | MaxMessageTermination(9, include_agent_event=True)
    )
    return Swarm([lead, helper], termination_condition=cond, max_turns=10), None


def contexts():
    """Every bounded model context: head and tail, token-limited (counted
    with the agent's own model client), and a buffered one for the selector."""
    summarizer_client = replay("Summary so far.")
    critic_client = replay("Fine.")
    summarizer = AssistantAgent(
        "summarizer",
        model_client=summarizer_client,
        model_context=HeadAndTailChatCompletionContext(head_size=1, tail_size=3),
        description="Summarizes.",
    )
    critic = AssistantAgent(
        "critic",
        model_client=critic_client,
        model_context=TokenLimitedChatCompletionContext(critic_client, token_limit=50),
        description="Critiques.",
    )
    selector_client = replay("summarizer", "critic")
    return SelectorGroupChat(
        [summarizer, critic],
        model_client=selector_client,
        model_context=BufferedChatCompletionContext(buffer_size=4),
        termination_condition=MaxMessageTermination(3),
        max_turns=2,
    ), "Discuss the plan."


class Plan(BaseModel):
    # A structured-output type of every field kind agentd reproduces. (No
    # docstring: AgentChat drops a type's description when it loads one from
    # its component JSON, so the load check could not see the export equal.)
    title: str
    steps: list[str]
    priority: int
    confidence: float = 0.5
    done: bool = False
    note: Optional[str] = Field(default=None, description="Anything else.")
    kind: Literal["bug", "feature"] = "feature"


def structured():
    """An assistant with structured output (output_content_type) and a
    format string, beside a plain one."""
    planner = AssistantAgent(
        "planner",
        model_client=replay('{"title": "Ship", "steps": ["build"], "priority": 1}'),
        description="Plans.",
        output_content_type=Plan,
        output_content_type_format="{title} (priority {priority}): {steps}",
    )
    reviewer = AssistantAgent("reviewer", model_client=replay("Fine."), description="Reviews.")
    # A team must be told the StructuredMessage types its agents produce;
    # its component JSON does not keep them, which is why AgentChat cannot
    # run this team loaded from its dump (agentd can).
    team = RoundRobinGroupChat(
        [planner, reviewer],
        termination_condition=MaxMessageTermination(3),
        custom_message_types=[StructuredMessage[Plan]],
    )
    return team, "Plan the release."


class Step(BaseModel):
    name: str


class NestedPlan(BaseModel):
    """A type with a nested model and a dict: pydantic validates them in
    ways agentd does not reproduce, so the team is refused."""

    steps: list[Step]
    owners: dict[str, int]


def structured_refused():
    planner = AssistantAgent("planner", model_client=replay("{}"), output_content_type=NestedPlan)
    return RoundRobinGroupChat([planner], termination_condition=MaxMessageTermination(3)), None


def local_function(city: str) -> str:
    """Looks up the weather (Python source that agentd must refuse)."""
    return f"Sunny in {city}"


def get_weather(city: Annotated[str, "The city"], unit: Literal["c", "f"] = "c") -> dict:
    return {"city": city, "temp": 21.5 if unit == "c" else 70.7, "unit": unit}


def list_cities(country: str, limit: Optional[int] = None) -> list[str]:
    cities = {"fr": ["Paris", "Lyon", "Nice"]}.get(country, [])
    return cities[:limit] if limit is not None else cities


def function_tools():
    """FunctionTools (their source runs in agentd's sandbox) and a
    PythonCodeExecutionTool on a DockerCommandLineCodeExecutor."""
    imports = [ImportFromModule("typing", ("Annotated", "Literal", "Optional"))]
    weather = AssistantAgent(
        "forecaster",
        model_client=replay("Sunny."),
        tools=[
            FunctionTool(get_weather, description="Get the weather of a city.", global_imports=imports),
            FunctionTool(list_cities, description="List the cities of a country.", global_imports=imports),
            PythonCodeExecutionTool(DockerCommandLineCodeExecutor(timeout=30, container_name="agentd-fixture")),
        ],
        reflect_on_tool_use=True,
    )
    return RoundRobinGroupChat([weather], termination_condition=MaxMessageTermination(3), max_turns=2), None


def http_tools():
    """HttpTools (agentd calls the REST API as HttpTool does) and MCP servers
    over SSE and streamable HTTP whose credentials are server secrets that
    the file names ({"secret": NAME}, never the value)."""
    issues_schema = {
        "type": "object",
        "properties": {
            "owner": {"type": "string", "description": "The account"},
            "repo": {"type": "string"},
            "state": {"type": "string", "enum": ["open", "closed"], "default": "open"},
            "labels": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["owner", "repo"],
    }
    note_schema = {"type": "object", "properties": {"text": {"type": "string"}, "pinned": {"type": "boolean"}}, "required": ["text"]}
    api = AssistantAgent(
        "api_user",
        model_client=replay("Done."),
        tools=[
            HttpTool(name="list_issues", description="List a repository's issues.", scheme="https", host="api.example.com", port=443,
                     path="/repos/{owner}/{repo}/issues", method="GET", json_schema=issues_schema,
                     headers={"Authorization": {"secret": "github"}, "Accept": "application/json"}),
            HttpTool(name="add_note", description="Add a note.", host="notes.internal", port=8080, path="/notes",
                     json_schema=note_schema, return_type="json", timeout=12.5),
        ],
    )
    mcp = AssistantAgent(
        "mcp_user",
        model_client=replay("Done."),
        workbench=[
            McpWorkbench(SseServerParams(url="https://mcp.example.com/sse", headers={"Authorization": {"secret": "mcp-token"}}, timeout=20)),
            McpWorkbench(StreamableHttpServerParams(url="https://tools.example.com/mcp", headers={"X-Api-Key": {"secret": "tools-key"}})),
        ],
    )
    return RoundRobinGroupChat([api, mcp], termination_condition=MaxMessageTermination(3)), None


def refused_five():
    """Five parts agentd refuses: each would run code from the file on the
    server, or has no agentd equivalent, or names an unknown provider."""
    a = AssistantAgent("tooluser", model_client=replay("hi"), tools=[local_function])
    b = CodeExecutorAgent("local_exec", code_executor=LocalCommandLineCodeExecutor(work_dir="/tmp/agentd-fixture"))
    c = AssistantAgent(
        "stdio_user",
        model_client=replay("hi"),
        workbench=McpWorkbench(StdioServerParams(command="uvx", args=["mcp-server-fetch"])),
    )
    d = AssistantAgent(
        "delegator", model_client=replay("hi"), tools=[AgentTool(AssistantAgent("inner", model_client=replay("hi")))]
    )
    cond = TextMentionTermination("STOP") | CustomTermination()
    return RoundRobinGroupChat([a, b, c, d], termination_condition=cond), None


def magentic_one():
    """MagenticOneGroupChat of two assistants with a termination condition,
    everything else AgentChat's defaults (max_turns 20, max_stalls 3, the
    default final answer prompt): the orchestrator's model is an OpenAI
    client, which agentd maps onto its endpoint."""
    researcher = AssistantAgent(
        "researcher", model_client=replay("Rivers: the Nile is the longest."), description="Finds facts.", system_message="You find facts."
    )
    writer = AssistantAgent("writer", model_client=replay("The Nile is the longest river."), description="Writes answers.", system_message="You write.")
    orchestrator = OpenAIChatCompletionClient(model="gpt-4o", temperature=0)
    team = MagenticOneGroupChat(
        [researcher, writer], model_client=orchestrator, termination_condition=TextMentionTermination("TERMINATE") | MaxMessageTermination(30)
    )
    return team, None


def ledger(satisfied, next_speaker, instruction, reason="On track."):
    """A progress ledger as the orchestrator's model writes it (LedgerEntry)."""
    return json.dumps(
        {
            "is_request_satisfied": {"reason": reason, "answer": satisfied},
            "is_in_loop": {"reason": "No repetition.", "answer": False},
            "is_progress_being_made": {"reason": "Steps are being taken.", "answer": True},
            "next_speaker": {"reason": "Their step is next.", "answer": next_speaker},
            "instruction_or_question": {"reason": "The plan says so.", "answer": instruction},
        }
    )


def magentic_custom():
    """MagenticOneGroupChat with its own name and description, max_turns,
    max_stalls and final answer prompt (sent as written: AgentChat fills in
    only its default prompt), run to a satisfied request: the orchestrator's
    replay client gives the facts, the plan, three progress ledgers and the
    final answer."""
    coder = AssistantAgent("coder", model_client=replay("def f(): return 1"), description="Writes Python.", system_message="You code.")
    tester = AssistantAgent("tester", model_client=replay("f() == 1: ok"), description="Tests code.", system_message="You test.")
    orchestrator = ReplayChatCompletionClient(
        [
            "Facts: f must return 1.",
            "Plan:\n- coder writes f\n- tester tests f",
            ledger(False, "coder", "Write f."),
            ledger(False, "tester", "Test f."),
            ledger(True, "tester", "", reason="f is written and tested."),
            "f() returns 1, and the test passed.",
        ],
        model_info=ModelInfo(vision=False, function_calling=True, json_output=True, family="unknown", structured_output=True),
    )
    team = MagenticOneGroupChat(
        [coder, tester],
        model_client=orchestrator,
        name="builders",
        description="Builds and tests a function.",
        max_turns=8,
        max_stalls=1,
        final_answer_prompt="The task was:\n{task}\n\nAnswer it in one line from the transcript above.",
    )
    return team, "Write f."


def graph_sequence():
    """GraphFlow A -> B -> C: each node runs when its parent has."""
    a = AssistantAgent("drafter", model_client=replay("A first draft."), description="Drafts.", system_message="You draft.")
    b = AssistantAgent("editor", model_client=replay("An edited draft."), description="Edits.", system_message="You edit.")
    c = AssistantAgent("publisher", model_client=replay("Published."), description="Publishes.", system_message="You publish.")
    builder = DiGraphBuilder()
    builder.add_node(a).add_node(b).add_node(c)
    builder.add_edge(a, b).add_edge(b, c)
    return GraphFlow([a, b, c], graph=builder.build()), "Write a note about graphs."


def graph_loop():
    """A loop that exits on a condition: writer -> reviewer, then back to
    the writer while the reviewer says REVISE, on to the publisher once it
    says APPROVE."""
    writer = AssistantAgent("writer", model_client=replay("Draft one.", "Draft two."), system_message="You write.")
    reviewer = AssistantAgent("reviewer", model_client=replay("REVISE: too short.", "APPROVE"), system_message="You review.")
    publisher = AssistantAgent("publisher", model_client=replay("Published draft two."), system_message="You publish.")
    builder = DiGraphBuilder()
    builder.add_node(writer).add_node(reviewer).add_node(publisher)
    builder.add_edge(writer, reviewer)
    builder.add_edge(reviewer, publisher, condition="APPROVE")
    builder.add_edge(reviewer, writer, condition="REVISE")
    builder.set_entry_point(writer)
    team = GraphFlow(
        [writer, reviewer, publisher],
        graph=builder.build(),
        termination_condition=MaxMessageTermination(20),
        max_turns=12,
        name="review-loop",
        description="Writes until the review approves.",
    )
    return team, "Write a haiku about rivers."


def graph_fan_out(activation):
    """A fan-out to two nodes that run concurrently, joined by a node that
    waits for both (all) or for the first (any)."""
    lead = AssistantAgent("lead", model_client=replay("Split: facts and style."), system_message="You split the work.")
    facts = AssistantAgent("facts", model_client=replay("Rivers flow downhill."), system_message="You check facts.")
    style = AssistantAgent("style", model_client=replay("Use short lines."), system_message="You advise on style.")
    join = AssistantAgent("joiner", model_client=replay("Joined.", "Joined again."), system_message="You join the parts.")
    builder = DiGraphBuilder()
    builder.add_node(lead).add_node(facts).add_node(style).add_node(join, activation=activation)
    builder.add_edge(lead, facts).add_edge(lead, style)
    builder.add_edge(facts, join, activation_condition=activation).add_edge(style, join, activation_condition=activation)
    return GraphFlow([lead, facts, style, join], graph=builder.build(), max_turns=8), "Write about rivers."


def graph_fan_out_all():
    return graph_fan_out("all")


def graph_fan_out_any():
    return graph_fan_out("any")


def graph_groups():
    """Activation groups: the editor runs after the drafter (group
    "initial") and again after each critique (group "feedback"); the loop
    exits to the finisher on "exit"."""
    drafter = AssistantAgent("drafter", model_client=replay("Draft."), system_message="You draft.")
    editor = AssistantAgent("editor", model_client=replay("Edited, loop.", "Edited again, exit."), system_message="You edit.")
    critic = AssistantAgent("critic", model_client=replay("Tighten it."), system_message="You critique.")
    finisher = AssistantAgent("finisher", model_client=replay("Final."), system_message="You finish.")
    builder = DiGraphBuilder()
    builder.add_node(drafter).add_node(editor).add_node(critic).add_node(finisher)
    builder.add_edge(drafter, editor, activation_group="initial")
    builder.add_edge(editor, critic, condition="loop")
    builder.add_edge(critic, editor, activation_group="feedback", activation_condition="any")
    builder.add_edge(editor, finisher, condition="exit")
    team = GraphFlow(
        [drafter, editor, critic, finisher],
        graph=builder.build(),
        termination_condition=TextMentionTermination("STOP"),
        max_turns=10,
    )
    return team, "Write a slogan."


def graph_message_filter():
    """MessageFilterAgents in a loop: the writer sees the task and the
    critic's last word; the critic sees the task, the writer's last draft
    and its own last two critiques; the summarizer sees the first message
    of the task and the last of everyone."""
    writer = MessageFilterAgent(
        "writer",
        wrapped_agent=AssistantAgent("writer", model_client=replay("Draft one.", "Draft two."), system_message="You write."),
        filter=MessageFilterConfig(
            per_source=[PerSourceFilter(source="user", position="first", count=1), PerSourceFilter(source="critic", position="last", count=1)]
        ),
    )
    critic = MessageFilterAgent(
        "critic",
        wrapped_agent=AssistantAgent("critic", model_client=replay("again", "done"), system_message="Say again or done."),
        filter=MessageFilterConfig(
            per_source=[
                PerSourceFilter(source="user"),
                PerSourceFilter(source="writer", position="last", count=1),
                PerSourceFilter(source="critic", position="last", count=2),
            ]
        ),
    )
    summarizer = MessageFilterAgent(
        "summarizer",
        wrapped_agent=AssistantAgent("summarizer", model_client=replay("Summary."), description="Summarizes."),
        filter=MessageFilterConfig(
            per_source=[
                PerSourceFilter(source="user", position="first", count=1),
                PerSourceFilter(source="writer", position="last", count=1),
                PerSourceFilter(source="critic", position="last", count=1),
            ]
        ),
    )
    builder = DiGraphBuilder()
    builder.add_node(writer).add_node(critic).add_node(summarizer)
    builder.add_edge(writer, critic)
    builder.add_edge(critic, writer, condition="again")
    builder.add_edge(critic, summarizer, condition="done")
    builder.set_entry_point(writer)
    return GraphFlow([writer, critic, summarizer], graph=builder.build(), max_turns=10), "Write a line about the sea."


def som_round_robin():
    """A SocietyOfMindAgent inside a RoundRobinGroupChat: its inner round
    robin of a writer and an editor runs until the editor says APPROVE, then
    its model answers; a translator speaks after it, and the panel speaks
    again (its inner team run afresh)."""
    writer = AssistantAgent("writer", model_client=replay("Roses are red.", "Violets are blue."), system_message="You write.", description="Writes.")
    editor = AssistantAgent("editor", model_client=replay("APPROVE", "Fine. APPROVE"), system_message="You edit. Say APPROVE when it is good.")
    inner = RoundRobinGroupChat([writer, editor], termination_condition=TextMentionTermination("APPROVE"), max_turns=4)
    panel = SocietyOfMindAgent(
        "panel", team=inner, model_client=replay("Roses are red.", "Violets are blue."), description="A writing panel."
    )
    translator = AssistantAgent("translator", model_client=replay("Las rosas son rojas."), system_message="Translate to Spanish.")
    return RoundRobinGroupChat([panel, translator], max_turns=3), "Write a poem line."


def som_inner_selector():
    """A SocietyOfMindAgent whose inner team is a SelectorGroupChat, with its
    own instruction and response prompt, in a Swarm whose first agent hands
    off to it."""
    planner = AssistantAgent("planner", model_client=replay("Plan: one function."), description="Plans.", system_message="You plan.")
    coder = AssistantAgent("coder", model_client=replay("def f(): return 1"), description="Codes.", system_message="You code.")
    inner = SelectorGroupChat(
        [planner, coder],
        model_client=replay("planner", "coder"),
        termination_condition=MaxMessageTermination(2),
        max_turns=3,
        name="builders",
        selector_prompt="Choose from {participants}.\n{roles}\n{history}",
    )
    builder = SocietyOfMindAgent(
        "builder",
        team=inner,
        model_client=replay("def f(): return 1 TERMINATE"),
        instruction="The team's transcript:",
        response_prompt="Give the final code only.",
    )
    triage = AssistantAgent("triage", model_client=replay(call("transfer_to_builder")), handoffs=["builder"], system_message="You route.")
    team = Swarm([triage, builder], termination_condition=TextMentionTermination("TERMINATE"), max_turns=4)
    return team, "Write f."


TEAMS = {
    "function_tools": function_tools,
    "http_tools": http_tools,
    "round_robin": round_robin,
    "selector": selector,
    "swarm": swarm,
    "assistant_options": assistant_options,
    "openai_client": openai_client,
    "azure_client": azure_client,
    "anthropic_client": anthropic_client,
    "human": human,
    "code_executor": code_executor,
    "terminations": terminations,
    "contexts": contexts,
    "refused_five": refused_five,
    "structured": structured,
    "structured_refused": structured_refused,
    "magentic_one": magentic_one,
    "magentic_custom": magentic_custom,
    "graph_sequence": graph_sequence,
    "graph_loop": graph_loop,
    "graph_fan_out_all": graph_fan_out_all,
    "graph_fan_out_any": graph_fan_out_any,
    "graph_groups": graph_groups,
    "graph_message_filter": graph_message_filter,
    "som_round_robin": som_round_robin,
    "som_inner_selector": som_inner_selector,
}


def n(name, *edges):
    return {"name": name, "edges": list(edges)}


def e(target, **kw):
    return dict(target=target, **kw)


# Graphs that AgentChat's DiGraph.graph_validate refuses, one rule each:
# graph_errors.json records its message for each, which agentd's validation
# must give too (TestGraphErrorsAsAgentChat). Nodes are in name order, the
# order in which agentd visits them.
BAD_GRAPHS = {
    "no nodes": {"nodes": {}},
    "no start node": {"nodes": {"a": n("a", e("b")), "b": n("b", e("a", condition="x"), e("c", condition="y")), "c": n("c")}},
    "no leaf node": {"nodes": {"a": n("a", e("b")), "b": n("b", e("a", condition="x"))}, "default_start_node": "a"},
    "mixed edges": {"nodes": {"a": n("a", e("b", condition="yes"), e("c")), "b": n("b"), "c": n("c")}},
    "conflicting activation": {
        "nodes": {"a": n("a", e("c", activation_condition="all")), "b": n("b", e("c", activation_condition="any")), "c": n("c")}
    },
    "conflicting activation in a group": {
        "nodes": {
            "a": n("a", e("b"), e("d", activation_group="g", activation_condition="any")),
            "b": n("b", e("d", activation_group="g")),
            "c": n("c", e("d")),
            "d": n("d"),
        }
    },
    "cycle without exit": {"nodes": {"a": n("a", e("b")), "b": n("b", e("c")), "c": n("c", e("b"), ), "d": n("d")}},
    "self loop without exit": {"nodes": {"a": n("a", e("b")), "b": n("b", e("b"), e("c")), "c": n("c")}},
}


def graph_errors():
    out = {}
    for name, g in BAD_GRAPHS.items():
        try:
            DiGraph(**g).graph_validate()
            out[name] = {"graph": g, "error": None}
        except ValueError as err:
            out[name] = {"graph": g, "error": str(err)}
    return out


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f, indent=2, sort_keys=False)
        f.write("\n")


async def run(team, task):
    result = await team.run(task=task)
    return {
        "task": task,
        "stop_reason": result.stop_reason,
        "messages": [message(m) for m in result.messages],
    }


def message(m):
    out = {"type": m.__class__.__name__, "source": m.source, "content": m.to_text()}
    if isinstance(m, StructuredMessage):
        # The object as model_dump_json writes it (fields in order).
        out["structured"] = m.content.model_dump_json()
    return out


def main():
    warnings.simplefilter("ignore")
    if len(sys.argv) > 2:
        team, task = example()
        write(sys.argv[2], team.dump_component().model_dump(mode="json"))
        write(os.path.join(OUT, "runs", "example.json"), asyncio.run(run(team, task)))
        print("dumped the example")
    write(os.path.join(OUT, "graph_errors.json"), graph_errors())
    for name, build in TEAMS.items():
        team, task = build()
        write(os.path.join(OUT, "agentchat", name + ".json"), team.dump_component().model_dump(mode="json"))
        if task is not None and name != "code_executor":
            write(os.path.join(OUT, "runs", name + ".json"), asyncio.run(run(team, task)))
        print("dumped", name)


if __name__ == "__main__":
    main()
