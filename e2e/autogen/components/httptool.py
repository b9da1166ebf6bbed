"""Records what AgentChat 0.7.5's HttpTool does, for agentd's http_api tools
(internal/tool/httpapi_test.go reads the record): for each tool, the schema
the model is shown, and for each call the request the REST API received and
the result text AgentChat made of the response.

Run it from the repository root in the AgentChat environment (see README.md;
HttpTool needs json_schema_to_pydantic, which env.sh puts there):

    /work/autogen-env/python.sh e2e/autogen/components/httptool.py internal/tool/testdata/httptool.json

The API is a local server of this script; it records each request as it
arrived (method, request target, Content-Type, body, X-Team) and answers
with the response the call names.
"""

import asyncio
import json
import sys
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from autogen_core import CancellationToken
from autogen_core.tools import StaticWorkbench
from autogen_ext.tools.http import HttpTool

OUT = sys.argv[1] if len(sys.argv) > 1 else "internal/tool/testdata/httptool.json"

JSON = "application/json"

REPO_SCHEMA = {
    "type": "object",
    "properties": {
        "owner": {"type": "string", "description": "The account that owns the repository"},
        "repo": {"type": "string"},
        "per_page": {"type": "integer", "description": "Results per page", "default": 30},
        "q": {"type": "string", "title": "Query"},
        "sort": {"type": "string", "enum": ["created", "updated"]},
        "labels": {"type": "array", "items": {"type": "string"}},
        "draft": {"type": "boolean"},
        "ratio": {"type": "number"},
    },
    "required": ["owner", "repo"],
}

ITEM_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string", "description": "The item's name"},
        "price": {"type": "number", "default": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object"},
        "kind": {"type": "string", "const": "item"},
        "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "active": {"type": "boolean", "default": True},
    },
    "required": ["id", "name"],
    "additionalProperties": False,
}

ECHO_SCHEMA = {"type": "object", "properties": {"value": {"type": "string", "description": "The value"}}, "required": ["value"]}


def resp(body, status=200, content_type=JSON):
    return {"status": status, "content_type": content_type, "body": body}


RICH_JSON = json.dumps(
    {"name": "Zoë's \"tool\"", "n": 3, "big": 12345678901234567890123, "f": 1.0, "e": 1e-7, "g": 1e16,
     "ok": True, "no": False, "none": None, "list": [1, 2.5, "x"], "nested": {"a": {"b": []}}, "tab": "a\tb\u00a0c\u2028"},
    ensure_ascii=False,
)

TOOLS = [
    {
        "config": dict(name="get_issues", description="List a repository's issues.", scheme="http", host="127.0.0.1", path="/repos/{owner}/{repo}/issues",
                       method="GET", headers={"X-Team": "blue"}, json_schema=REPO_SCHEMA, return_type="text"),
        "calls": [
            ({"owner": "agentd", "repo": "server"}, resp('[{"number": 1}]')),
            ({"owner": "a b", "repo": "zoë/x", "per_page": "7", "q": "state:open & label=\"bug\" 100%", "sort": "updated",
              "labels": ["bug", "help wanted", "ü"], "draft": "yes", "ratio": 2}, resp("not found", 404, "text/plain")),
            ({"owner": "..", "repo": "./x%2Fy", "labels": [], "draft": False, "ratio": 0.1}, resp("caf\xe9".encode("latin-1").decode("latin-1"), 200, "text/plain; charset=iso-8859-1")),
            ({"owner": "o", "repo": "r", "per_page": 2.0, "q": "", "ratio": 1e20}, resp("")),
        ],
    },
    {
        "config": dict(name="create_item", description="Create an item.", scheme="http", host="127.0.0.1", path="/items",
                       method="POST", headers=None, json_schema=ITEM_SCHEMA, return_type="json"),
        "calls": [
            ({"id": 1, "name": "Zoë \"quoted\" \\ \n\t\u2028 café"}, resp(RICH_JSON, 201)),
            ({"id": "2", "name": "x", "price": 9, "tags": ["a"], "meta": {"k": [1, {"z": None}], "a": 1.5}, "kind": "item",
              "grid": [[1, 2], [3]], "active": "no", "extra": 1}, resp('[1, "two", {"3": 4.0}]')),
            ({"id": 3, "name": "y"}, resp('"just a string"')),
        ],
    },
    {
        "config": dict(name="put_item", description="Replace an item.", scheme="http", host="127.0.0.1", path="/items/{id}",
                       method="PUT", headers=None, json_schema=ITEM_SCHEMA, return_type="text"),
        "calls": [({"id": 7, "name": "seven", "meta": {}}, resp('{"ok": true}'))],
    },
    {
        "config": dict(name="patch_item", description=None, scheme="http", host="127.0.0.1", path="/items/{id}",
                       method="PATCH", headers=None, json_schema=ITEM_SCHEMA, return_type="json"),
        "calls": [({"id": 8, "name": "eight", "price": 0.5}, resp('{"price": 0.5}'))],
    },
    {
        "config": dict(name="delete_item", description="Delete an item.", scheme="http", host="127.0.0.1", path="/items/{value}",
                       method="DELETE", headers=None, json_schema=ECHO_SCHEMA, return_type="text"),
        "calls": [({"value": "a b"}, resp("", 204))],
    },
]

state = {"next": None, "seen": []}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("utf-8") if n else ""
        state["seen"].append({"method": self.command, "target": self.path, "content_type": self.headers.get("Content-Type"),
                              "body": body, "x_team": self.headers.get("X-Team")})
        r = state["next"]
        charset = "latin-1" if "8859-1" in r["content_type"] else "utf-8"
        out = r["body"].encode(charset)
        self.send_response(r["status"])
        self.send_header("Content-Type", r["content_type"])
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one

    def log_message(self, *args):
        pass


async def main():
    warnings.simplefilter("ignore")
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    record = []
    for spec in TOOLS:
        tool = HttpTool(port=port, **spec["config"])
        dumped = tool.dump_component().model_dump(mode="json")
        dumped["config"]["port"] = 8080  # the recording server's port is not part of the record
        entry = {"component": dumped, "schema": tool.schema, "calls": []}
        workbench = StaticWorkbench([tool])
        for args, response in spec["calls"]:
            state["next"], state["seen"] = response, []
            result = await workbench.call_tool(tool.name, args, CancellationToken())
            entry["calls"].append({
                "arguments": args,
                "response": response,
                "request": state["seen"][0] if state["seen"] else None,
                "result": result.to_text(),
                "is_error": result.is_error,
            })
        record.append(entry)
    srv.shutdown()
    with open(OUT, "w") as f:
        json.dump(record, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print("recorded", sum(len(e["calls"]) for e in record), "calls of", len(record), "tools")


asyncio.run(main())
