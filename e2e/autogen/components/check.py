"""Loads agentd's exports of the fixture teams with AgentChat 0.7.5's own
Team.load_component, dumps the loaded team again, and writes the outcome to
internal/component/testdata/load_check.json (TestAgentChatLoadsExports reads
it). Run it from the repository root in the AgentChat environment:

    /work/autogen-env/python.sh e2e/autogen/components/check.py internal/component/testdata

For each export it records the file's sha256 (so the Go test knows the check
is about the export as committed), whether it loaded, the team and agent
classes AgentChat built (and of each SocietyOfMindAgent's inner team), for a GraphFlow whether its graph passes the
checks GraphFlow makes when a run starts, and whether AgentChat's own dump of the loaded team
equals the export (component descriptions aside: agentd writes short ones of
its own, and a Docker executor's container_name, which AgentChat generates).

A FunctionTool that AgentChat built from a file's source cannot dump itself
again (inspect.getsource has no file to read); before the second dump, each
loaded FunctionTool is handed the source it was loaded from, in the form
AgentChat's own to_code returns as it is (FunctionWithRequirementsStr).
"""

import glob
import hashlib
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stubs  # noqa: E402

stubs.install()

from autogen_agentchat.agents import SocietyOfMindAgent  # noqa: E402
from autogen_agentchat.base import Team  # noqa: E402
from autogen_agentchat.teams import GraphFlow  # noqa: E402
from autogen_core.code_executor._func_with_reqs import FunctionWithRequirementsStr  # noqa: E402
from autogen_core.tools import FunctionTool  # noqa: E402

# The OpenAI and Azure clients need a key to be built; it is never used (an
# export never holds one).
os.environ.setdefault("OPENAI_API_KEY", "sk-not-used")
os.environ.setdefault("AZURE_OPENAI_API_KEY", "not-used")

COMPONENT_KEYS = {"provider", "config"}


def normalize(v):
    if isinstance(v, dict):
        out = {k: normalize(x) for k, x in v.items()}
        if COMPONENT_KEYS <= v.keys():
            out.pop("description", None)
            if out["provider"].endswith("DockerCommandLineCodeExecutor"):
                out["config"].pop("container_name", None)
        return out
    if isinstance(v, list):
        return [normalize(x) for x in v]
    return v


def sources(v, out):
    """The source of each FunctionTool of an export, by tool name."""
    if isinstance(v, dict):
        if v.get("provider") == "autogen_core.tools.FunctionTool":
            out[v["config"]["name"]] = v["config"]["source_code"]
        for x in v.values():
            sources(x, out)
    elif isinstance(v, list):
        for x in v:
            sources(x, out)
    return out


def give_back_sources(team, by_name):
    for agent in team._participants:
        for wb in getattr(agent, "_workbench", []):
            for tool in getattr(wb, "_tools", []):
                if isinstance(tool, FunctionTool):
                    src = FunctionWithRequirementsStr.__new__(FunctionWithRequirementsStr)
                    object.__setattr__(src, "func", by_name[tool.name])
                    tool._func = src


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "internal/component/testdata"
    result = {}
    for path in sorted(glob.glob(os.path.join(base, "export", "*.json"))):
        name = os.path.splitext(os.path.basename(path))[0]
        raw = open(path, "rb").read()
        entry = {"sha256": hashlib.sha256(raw).hexdigest(), "loaded": False}
        try:
            exported = json.loads(raw)
            team = Team.load_component(exported)
            entry["loaded"] = True
            entry["team"] = type(team).__name__
            entry["agents"] = [type(p).__name__ + ":" + p.name for p in team._participants]
            # A SocietyOfMindAgent's inner team: its class and agents.
            inner = {
                p.name: [type(p._team).__name__] + [type(q).__name__ + ":" + q.name for q in p._team._participants]
                for p in team._participants
                if isinstance(p, SocietyOfMindAgent)
            }
            if inner:
                entry["inner_teams"] = inner
            if isinstance(team, GraphFlow):
                # GraphFlow checks its graph when a run builds its manager,
                # not at load: check it here as the manager does.
                team._graph.graph_validate()
                if team._graph.get_has_cycles() and team._termination_condition is None and team._max_turns is None:
                    raise ValueError("A termination condition is required for cyclic graphs without a maximum turn limit.")
                entry["graph_validated"] = True
            give_back_sources(team, sources(exported, {}))
            redumped = team.dump_component().model_dump(mode="json")
            entry["redumped_equal"] = normalize(redumped) == normalize(exported)
            if not entry["redumped_equal"]:
                entry["redumped"] = redumped
        except Exception as e:  # the record says what failed
            entry["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
        result[name] = entry
        print(name, "loaded" if entry["loaded"] else entry.get("error"), "equal" if entry.get("redumped_equal") else "")
    with open(os.path.join(base, "load_check.json"), "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
