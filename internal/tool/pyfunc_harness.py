# agentd's harness for python_function tools. It runs one call of a
# function from a FunctionTool's source in the chat's sandbox, as AgentChat
# 0.7.5's FunctionTool and StaticWorkbench run it in-process: the global
# imports and the source are executed in fresh globals, the function named
# by the request is called with the arguments as keyword arguments (an
# async function is awaited), and the result is the return value as
# BaseTool.return_value_as_string makes it, or an exception as
# StaticWorkbench._format_errors makes it.
#
# The request is JSON on stdin: {"source_code", "global_imports",
# "function", "arguments", "swarm", "context_variables"}. What the function
# prints is discarded (AgentChat prints it to the server's console); the one
# line this harness writes on the original stdout is {"content", "is_error",
# "handoff", "context_set", "context_removed"}.
#
# OpenAI Swarm's programs (openai/swarm) are run too: a function is given
# the chat's context variables as its context_variables argument when it
# has one, and may return Swarm's Agent or Result, importable as Swarm
# programs import them (from swarm import Agent; from swarm.types import
# Result) from the stand-ins below. A Result's value is the result, its
# context_variables are set, and an agent (by name) is a hand-off, whose
# result is {"assistant": name} as Swarm writes it. What the function
# changes in the dict it was given is a change of the variables too, as in
# Swarm, where that dict is the run's own. With "swarm" the result is
# str() of the return value, as Swarm's handle_function_result makes it.
import asyncio
import builtins
import copy
import json
import os
import sys
import types


class Agent:
    """Swarm's Agent as a function returns it: only its name is used, to
    hand off to the chat's agent of that name."""

    def __init__(self, name="Agent", **fields):
        if not isinstance(name, str):
            raise TypeError("Agent.name must be a string")
        self.name = name
        for k, v in fields.items():
            setattr(self, k, v)

    def __repr__(self):
        return f"Agent(name={self.name!r})"


class Result:
    """Swarm's Result: the value (a string), an agent to hand off to and
    context variables to set."""

    def __init__(self, value="", agent=None, context_variables=None):
        if not isinstance(value, str):
            raise TypeError("Result.value must be a string")
        if agent is not None and not isinstance(agent, Agent):
            raise TypeError("Result.agent must be an Agent")
        if context_variables is not None and not isinstance(context_variables, dict):
            raise TypeError("Result.context_variables must be a dict")
        self.value = value
        self.agent = agent
        self.context_variables = dict(context_variables or {})

    def __repr__(self):
        return f"Result(value={self.value!r}, agent={self.agent!r}, context_variables={self.context_variables!r})"


def install_swarm():
    """Makes `import swarm` and `import swarm.types` give the stand-ins."""
    pkg = types.ModuleType("swarm")
    pkg.__path__ = []
    sub = types.ModuleType("swarm.types")
    for m in (pkg, sub):
        m.Agent, m.Result = Agent, Result
    pkg.types = sub
    sys.modules["swarm"], sys.modules["swarm.types"] = pkg, sub


def format_errors(error):
    message = ""
    if hasattr(builtins, "ExceptionGroup") and isinstance(error, builtins.ExceptionGroup):
        for sub in error.exceptions:
            message += format_errors(sub)
    else:
        message += f"{str(error)}\n"
    return message.strip()


def as_string(value):
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        dumped = value.model_dump()
        if isinstance(dumped, dict):
            return json.dumps(dumped)
        return str(dumped)
    return str(value)


def import_code(im):
    if isinstance(im, str):
        return f"import {im}"
    if "module" in im:
        names = ", ".join(i if isinstance(i, str) else f"{i['name']} as {i['alias']}" for i in im["imports"])
        return f"from {im['module']} import {names}"
    return f"import {im['name']} as {im['alias']}"


def main():
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    result = os.fdopen(os.dup(1), "w", encoding="utf-8")
    quiet = os.open(os.devnull, os.O_WRONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)

    def finish(content, is_error, handoff="", context_set=None, context_removed=None):
        out = {"content": content, "is_error": is_error, "handoff": handoff,
               "context_set": context_set or {}, "context_removed": context_removed or []}
        result.write(json.dumps(out) + "\n")
        result.flush()
        os._exit(0)

    install_swarm()

    scope = {}
    for im in request["global_imports"]:
        code = import_code(im)
        try:
            exec(code, scope)
        except ModuleNotFoundError:
            finish(f"Failed to import {code}: Module not found. Please ensure the module is installed.", True)
        except ImportError as e:
            finish(f"Failed to import {code}: {str(e)}", True)
        except BaseException as e:
            finish(f"Unexpected error while importing {code}: {str(e)}", True)
    try:
        exec(request["source_code"], scope)
        func = scope[request["function"]]
    except BaseException as e:
        finish(f"Could not compile and load function: {e}", True)
    args = dict(request["arguments"])
    given = request.get("context_variables")
    if given is not None:
        args["context_variables"] = copy.deepcopy(given)
    try:
        if asyncio.iscoroutinefunction(func):
            value = asyncio.run(func(**args))
        else:
            value = func(**args)
    except BaseException as e:
        finish(format_errors(e), True)
    handoff, context_set, removed = "", {}, []
    if given is not None:
        # What the function changed in place, as Swarm keeps it.
        after = args["context_variables"]
        context_set = {k: v for k, v in after.items() if k not in given or given[k] != v}
        removed = [k for k in given if k not in after]
    if isinstance(value, Agent):
        handoff, content = value.name, json.dumps({"assistant": value.name})
    elif isinstance(value, Result):
        content = value.value
        context_set.update(value.context_variables)
        if value.agent is not None:
            handoff = value.agent.name
    elif request.get("swarm"):
        content = str(value)
    else:
        content = as_string(value)
    removed = [k for k in removed if k not in context_set]
    try:
        json.dumps(context_set, allow_nan=False)
    except (TypeError, ValueError) as e:
        finish(f"context variables must be JSON values: {e}", True)
    finish(content, False, handoff, context_set, removed)


main()
