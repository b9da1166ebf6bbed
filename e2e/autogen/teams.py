"""Builds the team-file scenarios of the golden runs with AgentChat 0.7.5:
each team is made in Python (FunctionTools from real functions), dumped
with dump_component() and written with its task and model script to
scenarios/<name>.json. record.py then loads the file with
Team.load_component and runs it (the functions run in its own process, as
AgentChat runs them); golden_test.go posts the same file to agentd, whose
functions run in its sandbox.

    /work/autogen-env/python.sh e2e/autogen/teams.py e2e/autogen/scenarios
"""

import json
import os
import sys
import warnings
from typing import Annotated, Literal, Optional

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.code_executor import ImportFromModule
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient
from autogen_ext.tools.http import HttpTool

TYPING = [ImportFromModule("typing", ("Annotated", "Literal", "Optional"))]


def get_weather(city: Annotated[str, "The city"], unit: Literal["c", "f"] = "c") -> dict:
    temps = {"Paris": 21.5, "Oslo": 4.0}
    t = temps.get(city, 15.0)
    return {"city": city, "temp": t if unit == "c" else round(t * 9 / 5 + 32, 1), "unit": unit, "rain": city == "Oslo"}


def list_cities(country: str, limit: Optional[int] = None) -> list[str]:
    cities = {"fr": ["Paris", "Lyon", "Nice"], "no": ["Oslo", "Bergen"]}.get(country, [])
    return cities[:limit] if limit is not None else cities


def convert(value: float, factor: float = 1.0, round_to: Optional[int] = None, flags: dict[str, bool] = {}) -> float:
    out = value * factor
    return round(out, round_to) if round_to is not None else out


def check_code(code: Literal["a", "b"], strict: bool = False) -> str:
    if code == "b":
        raise ValueError(f"code {code!r} is retired (strict={strict})")
    return "code a is fine"


async def count_words(text: str, words: list[str] = []) -> dict[str, int]:
    return {w: text.split().count(w) for w in words}


def tool(f, description):
    return FunctionTool(f, description=description, global_imports=TYPING)


def client():
    # The base URL is the recorder's model server (record.py points it at its
    # own port); agentd maps the client onto its openai endpoint.
    return OpenAIChatCompletionClient(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="golden")


def call(id_, name, arguments):
    return {"id": id_, "name": name, "arguments": json.dumps(arguments)}


def function_tools():
    planner = AssistantAgent(
        "planner",
        model_client=client(),
        description="Plans the trip.",
        system_message="You plan trips with your tools.",
        tools=[
            tool(get_weather, "Get the weather of a city."),
            tool(list_cities, "List the cities of a country."),
            tool(convert, "Convert a value."),
            tool(count_words, "Count words in a text."),
        ],
        reflect_on_tool_use=False,
    )
    writer = AssistantAgent(
        "writer",
        model_client=client(),
        description="Writes the summary.",
        system_message="You write summaries.",
        tools=[tool(get_weather, "Get the weather of a city."), tool(check_code, "Check a code.")],
        reflect_on_tool_use=True,
    )
    team = RoundRobinGroupChat(
        [planner, writer],
        termination_condition=TextMentionTermination("TERMINATE") | MaxMessageTermination(20),
        max_turns=6,
    )
    script = [
        {"tool_calls": [
            call("call_w1", "get_weather", {"city": "Paris", "unit": "f"}),
            call("call_l1", "list_cities", {"country": "fr", "limit": 2}),
            call("call_c1", "convert", {"value": 3}),
            call("call_n1", "count_words", {"text": "a b a", "words": ["a", "c"]}),
        ]},
        {"tool_calls": [
            call("call_k1", "check_code", {"code": "b", "strict": True}),
            call("call_w2", "get_weather", {"city": "Oslo"}),
        ]},
        {"content": "Paris is warm, Oslo is rainy; code b is retired."},
        {"tool_calls": [
            call("call_l2", "list_cities", {"country": "no"}),
            call("call_c2", "convert", {"value": 2.0, "factor": 1.5, "round_to": 0}),
        ]},
        {"tool_calls": [call("call_k2", "check_code", {"code": "a"})]},
        {"content": "All checked. TERMINATE"},
    ]
    return team, "Plan a trip to France and Norway.", script


# The port of the HTTP API the http_tools scenario's HttpTools call: record.py
# serves it inside the recorder's own loopback; golden_test.go points the
# tools at a server of its own that answers the same way (see record.py's
# echo).
ECHO_PORT = 18765

ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "customer": {"type": "string", "description": "The customer's id"},
        "status": {"type": "string", "enum": ["open", "shipped"]},
        "limit": {"type": "integer", "default": 5},
    },
    "required": ["customer"],
}

NOTE_SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "integer"},
        "text": {"type": "string", "description": "The note"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "urgent": {"type": "boolean", "default": False},
    },
    "required": ["order_id", "text"],
}


def http_tools():
    """A support agent whose tools are HttpTools of a REST API (a GET with a
    path parameter and a query, a POST with a JSON body), with and without
    reflection, beside a FunctionTool. Each has headers: AgentChat 0.7.5
    dumps an HttpTool without headers in a form it cannot load again."""
    orders = HttpTool(name="list_orders", description="List a customer's orders.", scheme="http", host="127.0.0.1",
                      port=ECHO_PORT, path="/customers/{customer}/orders", method="GET", json_schema=ORDER_SCHEMA,
                      headers={"X-Team": "support"}, return_type="text")
    note = HttpTool(name="add_note", description="Add a note to an order.", scheme="http", host="127.0.0.1",
                    port=ECHO_PORT, path="/notes", method="POST", json_schema=NOTE_SCHEMA, headers={"Content-Language": "en"},
                    return_type="json")
    support = AssistantAgent(
        "support",
        model_client=client(),
        description="Answers customers.",
        system_message="You answer customers with the order API.",
        tools=[orders, note, tool(check_code, "Check a code.")],
        reflect_on_tool_use=False,
    )
    reviewer = AssistantAgent(
        "reviewer",
        model_client=client(),
        description="Reviews the answer.",
        system_message="You review answers; you may look orders up.",
        tools=[orders],
        reflect_on_tool_use=True,
    )
    team = RoundRobinGroupChat([support, reviewer], termination_condition=TextMentionTermination("TERMINATE"), max_turns=4)
    script = [
        {"tool_calls": [
            call("call_o1", "list_orders", {"customer": "c-17", "status": "open"}),
            call("call_n1", "add_note", {"order_id": 42, "text": "Customer asked about delivery.", "tags": ["delivery", "vip"]}),
        ]},
        {"tool_calls": [call("call_o2", "list_orders", {"customer": "c-17", "limit": 2})]},
        {"content": "The orders are listed and the note is on order 42."},
        {"tool_calls": [call("call_k1", "check_code", {"code": "a"})]},
        {"content": "Done. TERMINATE"},
    ]
    return team, "Where is my order? I am customer c-17.", script, {"http_echo_port": ECHO_PORT}


SCENARIOS = {"team_function_tools": function_tools, "team_http_tools": http_tools}


def main():
    warnings.simplefilter("ignore")
    out = sys.argv[1] if len(sys.argv) > 1 else "e2e/autogen/scenarios"
    for name, build in SCENARIOS.items():
        team, task, script, *extra = build()
        scenario = {"team": team.dump_component().model_dump(mode="json"), "task": task, "script": script}
        for e in extra:
            scenario.update(e)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(scenario, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print("wrote", name)


if __name__ == "__main__":
    main()
