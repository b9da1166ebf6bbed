"""Records what OpenAI Swarm's function_to_json (swarm/util.py) makes of
Python functions, as Swarm's get_chat_completion sends it (the
context_variables parameter taken out), for internal/pyfunc's tests of
ParseSwarm: internal/pyfunc/testdata/swarm_schemas.json.

    python3 functions.py OUT.json

Each case is a python_function's source and global imports; the function is
the one named after the source's first "def ", defined by executing the
imports and the source in fresh globals (record.define, as agentd's sandbox
harness defines it).
"""

import json
import sys

from record import define
from swarm.util import function_to_json

CASES = [
    ("plain", "def f(a: str, b: int, c: float, d: bool, e: list, g: dict):\n    return a\n", []),
    ("untyped", "def f(a, b=1, c=None):\n    return a\n", []),
    ("defaults_any", "def f(a: int = 1, b: str = 'x', c: list = [], d: dict = {}, e=lambda: 1, g=max(1, 2)):\n    pass\n", []),
    ("optional_union", "def f(a: Optional[int], b: int | None, c: Union[int, str] = 1, d: 'int' = 0, e: None = None):\n    pass\n",
     [{"module": "typing", "imports": ["Optional", "Union"]}]),
    ("generic", "def f(a: list[int], b: dict[str, int], c: List[int], d: Dict[str, int], e: typing.Any):\n    pass\n",
     ["typing", {"module": "typing", "imports": ["List", "Dict"]}]),
    ("builtins_attr", "import builtins\ndef f(a: builtins.int, b: builtins.str = 'x'):\n    pass\n", []),
    ("future", "from __future__ import annotations\ndef f(a: int, b: str = 'x'):\n    pass\n", []),
    ("stars", "def f(a, /, b: int, *args, c: bool = False, **kwargs):\n    pass\n", []),
    ("bare_star", "def f(a: int, *, b: float):\n    pass\n", []),
    ("context", "def f(x: int, context_variables: dict):\n    \"\"\"Uses the variables.\"\"\"\n    return x\n", []),
    ("context_untyped_first", "def f(context_variables, x: str = 'a'):\n    return x\n", []),
    ("no_params", "def f():\n    return 1\n", []),
    ("async", "async def f(a: int):\n    \"\"\"Async.\"\"\"\n    return a\n", []),
    ("return_annotation", "def f(a: int) -> dict[str, list[int]]:\n    \"\"\"Returns.\"\"\"\n    return {}\n", []),
    ("multiline_signature", "def f(\n    a: int,  # the first\n    b: str = (\n        'x'\n    ),\n):\n    '''Doc.'''\n    return a\n", []),
    ("doc_one_line", "def f(a):\n    \"\"\"One line.\"\"\"\n", []),
    ("doc_same_line", "def f(a): 'Same line.'; return a\n", []),
    ("doc_indented", "def f(a):\n    \"\"\"First line.\n\n    Second paragraph.\n        Indented more.\n    \"\"\"\n", []),
    ("doc_second_line", "def f(a):\n    \"\"\"\n    Starts on the second line.\n      and goes on.\n    \"\"\"\n", []),
    ("doc_tabs", "def f(a):\n\t\"\"\"Tabs.\n\n\t\tAfter two tabs.\n\tAfter one.\n\t\"\"\"\n", []),
    ("doc_mixed_indent", "def f(a):\n    \"\"\"  Leading spaces.\n  less\n      more\n    \"\"\"\n", []),
    ("doc_blank_lines", "def f(a):\n    \"\"\"Blank.\n\n        \n    End.\"\"\"\n", []),
    ("doc_escapes", "def f(a):\n    \"\"\"Escapes: \\t tab, \\n newline, \\u00e9, \\x41, \\\\ backslash, \\q unknown.\"\"\"\n", []),
    ("doc_raw", "def f(a):\n    r\"\"\"Raw: \\n stays.\"\"\"\n", []),
    ("doc_single_quotes", "def f(a):\n    'Single quoted.'\n", []),
    ("doc_concat", "def f(a):\n    \"Part one, \" 'part two.'\n    return a\n", []),
    ("doc_unicode", "def f(a):\n    \"\"\"Ünïcödé — ok.\"\"\"\n", []),
    ("doc_comment_after", "def f(a):\n    \"\"\"Doc.\"\"\"  # a comment\n    return a\n", []),
    ("doc_after_comment", "def f(a):\n    # a comment first\n    \"\"\"Still the doc.\"\"\"\n", []),
    ("no_doc_fstring", "def f(a):\n    f\"\"\"Not a doc {a}.\"\"\"\n", []),
    ("no_doc_bytes", "def f(a):\n    b\"\"\"Not a doc.\"\"\"\n", []),
    ("no_doc_expression", "def f(a):\n    \"abc\".upper()\n", []),
    ("no_doc_binop", "def f(a):\n    \"abc\" + \"def\"\n", []),
    ("no_doc_statement", "def f(a):\n    x = \"\"\"Not a doc.\"\"\"\n    return x\n", []),
    ("doc_semicolon", "def f(a):\n    \"Doc.\"; x = 1\n    return x\n", []),
    ("first_def_wins", "def g(a: int):\n    return f(a)\n\ndef f(b: str):\n    return b\n", []),
]


def main() -> None:
    out = []
    for name, src, imports in CASES:
        tool = function_to_json(define(src, imports))
        # As Swarm's get_chat_completion hides it from the model.
        params = tool["function"]["parameters"]
        params["properties"].pop("context_variables", None)
        if "context_variables" in params["required"]:
            params["required"].remove("context_variables")
        out.append({"name": name, "source_code": src, "global_imports": imports, "tool": tool})
    with open(sys.argv[1], "w") as f:
        f.write(json.dumps({"cases": out}, indent=1, ensure_ascii=False) + "\n")
    print(f"{sys.argv[1]}: {len(out)} functions")


main()
