"""Builds the team-file scenarios of the golden runs with AgentChat 0.7.5:
each team is made in Python (FunctionTools from real functions), dumped
with dump_component() and written with its task and model script to
scenarios/<name>.json. record.py then loads the file with
Team.load_component and runs it (the functions run in its own process, as
AgentChat runs them); golden_test.go posts the same file to agentd, whose
functions run in its sandbox.

    /work/autogen-env/python.sh test/autogen/teams.py test/autogen/scenarios
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


SCENARIOS = {"team_function_tools": function_tools}


def main():
    warnings.simplefilter("ignore")
    out = sys.argv[1] if len(sys.argv) > 1 else "test/autogen/scenarios"
    for name, build in SCENARIOS.items():
        team, task, script = build()
        scenario = {"team": team.dump_component().model_dump(mode="json"), "task": task, "script": script}
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(scenario, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print("wrote", name)


if __name__ == "__main__":
    main()
