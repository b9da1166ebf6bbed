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
# "function", "arguments"}. What the function prints is discarded (AgentChat
# prints it to the server's console); the one line this harness writes on
# the original stdout is {"content", "is_error"}.
import asyncio
import builtins
import json
import os
import sys


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

    def finish(content, is_error):
        result.write(json.dumps({"content": content, "is_error": is_error}) + "\n")
        result.flush()
        os._exit(0)

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
    try:
        if asyncio.iscoroutinefunction(func):
            value = asyncio.run(func(**request["arguments"]))
        else:
            value = func(**request["arguments"])
        finish(as_string(value), False)
    except BaseException as e:
        finish(format_errors(e), True)


main()
