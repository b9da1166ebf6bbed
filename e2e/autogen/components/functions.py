"""Loads FunctionTools from their component config with AgentChat 0.7.5 and
records what AgentChat makes of them: the JSON Schema the model is shown
for each signature (or the error that refuses it), and the result text of
calls of a few functions. These are the fixtures of agentd's own derivation
of the schema from a function's source (internal/pyfunc) and of its sandbox
harness (internal/tool).

Run it from the repository root in the AgentChat environment:

    /work/autogen-env/python.sh e2e/autogen/components/functions.py

It writes internal/pyfunc/testdata/agentchat_schemas.json and
internal/tool/testdata/agentchat_function_calls.json. The functions run in
this (network-less) process, as AgentChat runs a FunctionTool it loads.
The schema cases include every FunctionTool of AutoGen Studio's default
gallery (internal/component/testdata/gallery, see gallery.sh), named
gallery_<tool>, with their own source and imports.
"""

import asyncio
import json
import os
import sys
import warnings

from autogen_core import CancellationToken
from autogen_core.tools import FunctionTool, StaticStreamWorkbench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stubs  # noqa: E402

stubs.install()

warnings.simplefilter("ignore")

TYPING = [{"module": "typing", "imports": ["Optional", "List", "Dict", "Literal", "Annotated", "Union", "Any"]}]

# (name, source, global_imports). Each becomes a FunctionTool component
# loaded with FunctionTool.load_component, as a team file's tool is.
SCHEMA_CASES = [
    ("scalars", "def scalars(a: str, b: int, c: float, d: bool) -> str:\n    return a\n", []),
    ("defaults", "def defaults(a: str = 'x', b: int = -3, c: float = 1.5, d: bool = True, e: float = 2, f: str = \"say \\\"hi\\\"\\n\") -> str:\n    return a\n", []),
    ("float_forms", "def float_forms(a: float = 1e20, b: float = 1e-7, c: float = 0.1, d: float = 123456789012345678.0, e: float = 1_000.5, f: float = .5, g: float = 5., h: float = -0.0, i: float = 1e16, j: float = 1e15) -> str:\n    return ''\n", []),
    ("int_forms", "def int_forms(a: int = 0x1F, b: int = 1_000_000, c: int = 0o17, d: int = 0b101, e: int = 123456789012345678901234567890, f: int = -0) -> str:\n    return ''\n", []),
    ("annotated", "def annotated(city: Annotated[str, 'The city name'], days: Annotated[int, \"How many days\"] = 3) -> str:\n    return city\n", TYPING),
    ("annotated_extra", "def annotated_extra(a: Annotated[str, 'first', 'second']) -> str:\n    return a\n", TYPING),
    ("annotated_nested", "def annotated_nested(t: Annotated[Optional[List[Annotated[int, 'inner']]], 'outer'] = None) -> str:\n    return ''\n", TYPING),
    ("annotated_not_str", "def annotated_not_str(a: Annotated[str, 3]) -> str:\n    return a\n", TYPING),
    ("optional", "def optional(a: Optional[int] = None, b: Optional[str] = 'x', c: Optional[float] = None, d: Optional[List[str]] = None) -> str:\n    return ''\n", TYPING),
    ("optional_required", "def optional_required(a: Optional[int]) -> str:\n    return ''\n", TYPING),
    ("union", "def union(a: Union[int, str], b: Union[int, None] = None, c: Union[str, int, None] = None, d: Optional[Union[int, str]] = None, e: Union[int, Optional[str]] = None) -> str:\n    return ''\n", TYPING),
    ("pep604", "def pep604(a: int | None = None, b: str | int = 1, c: list[int] | None = None, d: None | str = None) -> str:\n    return ''\n", []),
    ("literal", "def literal(a: Literal['x', 'y'], b: Literal[1, 2] = 1, c: Literal['only'] = 'only', d: Literal[True, False] = True, e: Literal[1, 'a'] = 1, f: Literal[True] = True, g: Literal[-1, 0] = 0) -> str:\n    return ''\n", TYPING),
    ("literal_none", "def literal_none(a: Literal['x', None] = None) -> str:\n    return ''\n", TYPING),
    ("literal_optional", "def literal_optional(a: Optional[Literal['x', 'y']] = None) -> str:\n    return ''\n", TYPING),
    ("lists", "def lists(a: list, b: List, c: list[str], d: List[int], e: list[list[float]], f: List[Literal['a', 'b']] = ['a'], g: list[bool] = [], h: list = (1, 2)) -> str:\n    return ''\n", TYPING),
    ("dicts", "def dicts(a: dict, b: Dict, c: dict[str, int], d: Dict[str, List[float]] = {'a': [1.0]}, e: dict[str, Any] = {}, f: Dict[str, str] = {'k': 'v'}) -> str:\n    return ''\n", TYPING),
    ("dict_int_keys", "def dict_int_keys(a: dict[int, str]) -> str:\n    return ''\n", []),
    ("any", "def any_(a: Any, b: Any = None, c: list[Any] = []) -> str:\n    return ''\n", TYPING),
    ("typing_module", "def typing_module(a: typing.Optional[typing.List[int]] = None, b: typing.Annotated[str, 'B'] = 'b') -> str:\n    return ''\n", ["typing"]),
    ("typing_alias", "def typing_alias(a: t.Optional[int] = None) -> str:\n    return ''\n", [{"name": "typing", "alias": "t"}]),
    ("typing_extensions", "def typing_extensions_(a: Annotated[str, 'A'], b: Literal['x'] = 'x') -> str:\n    return a\n", [{"module": "typing_extensions", "imports": ["Annotated", "Literal"]}]),
    ("from_alias", "def from_alias(a: Opt[int] = None) -> str:\n    return ''\n", [{"module": "typing", "imports": [{"name": "Optional", "alias": "Opt"}]}]),
    ("async_def", "async def async_def(q: str, limit: int = 10) -> list[str]:\n    return [q] * limit\n", []),
    ("no_params", "def no_params() -> str:\n    return 'x'\n", []),
    ("titles", "def titles(my_var: int, x2y: int, a_b_c: str, HTTPCode: int, aB: int, snake_case_2x: int, z: int, Ab_cD: int) -> str:\n    return ''\n", []),
    ("multiline", "def multiline(\n    a: str,  # the first\n    b: int = 2,\n    *,\n    c: bool = False,\n) -> str:\n    return a\n", []),
    ("kwonly", "def kwonly(a: str, *, b: int) -> str:\n    return a\n", []),
    ("string_defaults", "def string_defaults(a: str = 'it\\'s', b: str = r'raw\\n', c: str = '''tri\nple''', d: str = 'a' 'b', e: str = '\\u00e9\\x41\\t', f: str = 'é', g: str = '<&>') -> str:\n    return a\n", []),
    ("nested_defaults", "def nested_defaults(a: dict = {'x': [1, 2.5, None, True, 'y'], 'z': {}}, b: list = [(1, 2), [3]]) -> str:\n    return ''\n", []),
    ("return_annotations", "def return_annotations(a: str) -> dict[str, int]:\n    return {}\n", []),
    ("no_return_annotation", "def no_return_annotation(a: str):\n    return a\n", []),
    ("comment_first", "# helper for def weather(\ndef comment_first(a: str) -> str:\n    return a\n", []),
    ("decorated", "@staticmethod\ndef decorated(a: str) -> str:\n    return a\n", []),
    ("unannotated_required", "def unannotated_required(a) -> str:\n    return a\n", []),
    ("unannotated_default", "def unannotated_default(a: str, b=3) -> str:\n    return a\n", []),
    ("star_args", "def star_args(*args: int) -> str:\n    return ''\n", []),
    ("star_kwargs", "def star_kwargs(a: str, **kw: int) -> str:\n    return a\n", []),
    ("tuple_param", "def tuple_param(a: tuple[int, int]) -> str:\n    return ''\n", []),
    ("set_param", "def set_param(a: set[str]) -> str:\n    return ''\n", []),
    ("unknown_name", "def unknown_name(a: Foo) -> str:\n    return ''\n", []),
    ("not_imported", "def not_imported(a: Optional[int] = None) -> str:\n    return ''\n", []),
    ("call_default", "def call_default(a: int = len('abc')) -> str:\n    return ''\n", []),
    ("name_default", "def name_default(a: int = MAX) -> str:\n    return ''\n", []),
    ("string_annotation", "def string_annotation(a: 'int', b: 'Optional[str]' = None) -> str:\n    return ''\n", TYPING),
    ("cancellation", "def cancellation(a: str, cancellation_token: CancellationToken) -> str:\n    return a\n", [{"module": "autogen_core", "imports": ["CancellationToken"]}]),
    ("two_defs", "def helper(x: int) -> int:\n    return x\n\ndef two_defs(a: int) -> int:\n    return helper(a)\n", []),
    ("bytes_param", "def bytes_param(a: bytes) -> str:\n    return ''\n", []),
    ("none_param", "def none_param(a: None = None) -> str:\n    return ''\n", []),
    ("bool_int_defaults", "def bool_int_defaults(a: bool = 0, b: int = True, c: float = False) -> str:\n    return ''\n", []),
    ("literal_float", "def literal_float(a: Literal[1.5, 2.5] = 1.5) -> str:\n    return ''\n", TYPING),
    ("lambda_default", "def lambda_default(a: str = ('x')) -> str:\n    return a\n", []),
    ("neg_float_default", "def neg_float_default(a: float = -1.5, b: float = +2.0, c: int = - 4) -> str:\n    return ''\n", []),
    ("unicode_name", "def unicode_name(café: str) -> str:\n    return café\n", []),
    ("underscore_name", "def underscore_name(_a: str) -> str:\n    return _a\n", []),
]


def tool_config(name, source, imports, description="A function."):
    return {
        "provider": "autogen_core.tools.FunctionTool",
        "component_type": "tool",
        "version": 1,
        "component_version": 1,
        "config": {
            "source_code": source,
            "name": name,
            "description": description,
            "global_imports": imports,
            "has_cancellation_support": False,
        },
    }


GALLERY = "internal/component/testdata/gallery/default_gallery.json"


def gallery_cases():
    """Every FunctionTool of the gallery (its tools and its teams' agents'
    workbenches), once per name."""
    with open(GALLERY, encoding="utf-8") as f:
        gallery = json.load(f)
    found = {}

    def walk(v):
        if isinstance(v, dict):
            if v.get("provider") == "autogen_core.tools.FunctionTool":
                c = v["config"]
                found.setdefault(c["name"], (c["source_code"], c["global_imports"]))
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(gallery["components"])
    return [("gallery_" + n, src, imports) for n, (src, imports) in sorted(found.items())]


def schemas():
    out = []
    for name, source, imports in SCHEMA_CASES + gallery_cases():
        case = {"name": name, "source_code": source, "global_imports": imports}
        try:
            tool = FunctionTool.load_component(tool_config(name.removeprefix("gallery_"), source, imports))
            case["schema"] = json.dumps(tool.schema["parameters"], separators=(",", ":"), ensure_ascii=False)
        except Exception as e:  # AgentChat refuses it at load or schema time
            case["error"] = f"{type(e).__name__}: {e}"
        out.append(case)
    return out


CALL_SOURCE = '''
import json

def call(kind: str, n: int = 2, x: float = 1.0, items: Optional[List[int]] = None, flag: bool = False) -> Any:
    if kind == "str":
        return "hello " * n
    if kind == "int":
        return n * 21
    if kind == "float":
        return x
    if kind == "float_big":
        return x * 1e20
    if kind == "dict":
        return {"city": "Paris", "temp": 21.5, "ok": True, "none": None, "tags": ["a", "b"], "quote": "it's"}
    if kind == "list":
        return [1, "two", 3.0, None, False, {"k": "v"}]
    if kind == "items":
        return items
    if kind == "none":
        return None
    if kind == "bool":
        return flag
    if kind == "tuple":
        return (1, "a")
    if kind == "set":
        return {3}
    if kind == "object":
        return Point(1, 2)
    if kind == "json":
        return json.dumps({"a": [1, 2]})
    if kind == "bytes":
        return b"ab\\x00"
    if kind == "unicode":
        return "naïve ☃ \\u0000 tab\\tend"
    if kind == "multiline":
        return "line 1\\nline 2\\n"
    if kind == "raise_value":
        raise ValueError("city not found: Atlantis")
    if kind == "raise_key":
        raise KeyError("missing")
    if kind == "raise_empty":
        raise RuntimeError()
    if kind == "raise_multiline":
        raise RuntimeError("  first line\\nsecond line  \\n")
    if kind == "raise_group":
        raise ExceptionGroup("many", [ValueError("one"), ExceptionGroup("inner", [KeyError("two")]), TypeError("three")])
    if kind == "zero_division":
        return 1 / 0
    if kind == "print":
        print("noise on stdout")
        import sys
        print("noise on stderr", file=sys.stderr)
        return "quiet result"
    return "unknown kind"


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __repr__(self):
        return f"Point({self.x}, {self.y})"
'''

ASYNC_SOURCE = '''
async def acall(word: str, times: int = 2) -> str:
    import asyncio
    await asyncio.sleep(0)
    if word == "boom":
        raise ValueError("async boom")
    return "-".join([word] * times)
'''

CALLS = [
    ("call", {"kind": "str"}),
    ("call", {"kind": "str", "n": 3}),
    ("call", {"kind": "int"}),
    ("call", {"kind": "int", "n": 2.0}),
    ("call", {"kind": "float"}),
    ("call", {"kind": "float", "x": 3}),
    ("call", {"kind": "float", "x": 0.1}),
    ("call", {"kind": "float", "x": 1e-7}),
    ("call", {"kind": "float_big", "x": 2}),
    ("call", {"kind": "dict"}),
    ("call", {"kind": "list"}),
    ("call", {"kind": "items", "items": [1, 2, 3]}),
    ("call", {"kind": "items", "items": [1.0, 2]}),
    ("call", {"kind": "items"}),
    ("call", {"kind": "none"}),
    ("call", {"kind": "bool", "flag": True}),
    ("call", {"kind": "tuple"}),
    ("call", {"kind": "set"}),
    ("call", {"kind": "object"}),
    ("call", {"kind": "json"}),
    ("call", {"kind": "bytes"}),
    ("call", {"kind": "unicode"}),
    ("call", {"kind": "multiline"}),
    ("call", {"kind": "raise_value"}),
    ("call", {"kind": "raise_key"}),
    ("call", {"kind": "raise_empty"}),
    ("call", {"kind": "raise_multiline"}),
    ("call", {"kind": "raise_group"}),
    ("call", {"kind": "zero_division"}),
    ("call", {"kind": "print"}),
    ("call", {"kind": "str", "extra": "ignored"}),
    ("acall", {"word": "ab"}),
    ("acall", {"word": "ab", "times": 3}),
    ("acall", {"word": "boom"}),
]


async def calls():
    tools = {
        "call": FunctionTool.load_component(tool_config("call", CALL_SOURCE.lstrip("\n"), TYPING)),
        "acall": FunctionTool.load_component(tool_config("acall", ASYNC_SOURCE.lstrip("\n"), [])),
    }
    wb = StaticStreamWorkbench(list(tools.values()))
    out = {"functions": {n: {"source_code": s.lstrip("\n"), "global_imports": i}
                         for n, s, i in [("call", CALL_SOURCE, TYPING), ("acall", ASYNC_SOURCE, [])]},
           "calls": []}
    for name, args in CALLS:
        result = None
        async for ev in wb.call_tool_stream(name, args, CancellationToken()):
            result = ev
        out["calls"].append({"function": name, "arguments": args,
                             "content": result.to_text(), "is_error": result.is_error})
    return out


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    write("internal/pyfunc/testdata/agentchat_schemas.json", {"cases": schemas()})
    write("internal/tool/testdata/agentchat_function_calls.json", asyncio.run(calls()))
