"""Records what pydantic (AgentChat 0.7.5's environment) does with model
replies for structured-output types: the fixture of internal/structured's
tests (internal/structured/testdata/pydantic.json).

Run it from the repository root in the AgentChat environment:

    /work/autogen-env/python.sh e2e/autogen/structured.py internal/structured/testdata/pydantic.json

For each type it writes the JSON Schema AgentChat's component JSON holds
(model_json_schema()), the schema AgentChat's OpenAI client sends
(openai's to_strict_json_schema), a format string, and for each reply what
AgentChat makes of it: the StructuredMessage's object as model_dump_json
writes it and the format string filled in (StructuredMessage.to_text), or
that model_validate_json refused it.
"""

import json
import sys
from typing import Literal, Optional

from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel, Field, ValidationError


class Plan(BaseModel):
    """A plan."""

    title: str
    steps: list[str]
    priority: int
    confidence: float = 0.5
    done: bool = False
    note: Optional[str] = Field(default=None, description="Anything else.")
    kind: Literal["bug", "feature"] = "feature"


class Numbers(BaseModel):
    f: float
    i: int
    fs: list[float] = [1, 2.5]
    d: float = 2
    oi: Optional[int] = 7


class Flags(BaseModel):
    b: bool
    level: Literal[1, 2, 3] = 1
    s: str = "x"


FLOATS = [0, 1, -1, 0.5, 1e16, 1e15, 1e-5, 1e-4, 1.5e-7, 123.456, 1e22, -0.0, 0.1 + 0.2, 5e-324,
          1.7976931348623157e308, 12345678901234567.0, 9007199254740993, 123456789012345678, 2.5e-300, 100.0, 1e21]
STRINGS = ["plain", 'a"b\\c', "line\nbreak\ttab\r", "\x01\x1f\x7f", "\u2028\u2029", "é ü 中文 😀", "<>&/", "it's", "x'y\"z", ""]

CASES = {
    "Plan": (Plan, "{title} (priority {priority}, confidence {confidence}, done {done}): {steps}; note: {note}; kind: {kind} {{braces}}", [
        '{"title": "Ship", "steps": ["build", "test"], "priority": 1}',
        ' {"title": "Ship", "steps": [], "priority": "2", "confidence": 1, "extra": "dropped"} ',
        '{"kind":"bug","title":"T","steps":["a\'b", "c\\"d", "e\'f\\"g", "\\u00e9\\n"],"priority":1.0,"confidence":1e-05,"done":true,"note":"n"}',
        '{"title": "T", "steps": ["x"], "priority": 1, "kind": "chore"}',
        '{"title": "T", "steps": "x", "priority": 1}',
        '{"title": "T", "steps": ["x"]}',
        '{"title": 5, "steps": ["x"], "priority": 1}',
        '{"title": "T", "steps": ["x"], "priority": 1.5}',
        '{"title": "T", "steps": ["x"], "priority": " 1_000 "}',
        '{"title": "T", "steps": ["x"], "priority": "+5"}',
        '{"title": "T", "steps": ["x"], "priority": "5.0"}',
        '{"title": "T", "steps": ["x"], "priority": "5.5"}',
        '{"title": "T", "steps": ["x"], "priority": true}',
        '{"title": "T", "steps": ["x"], "priority": 12345678901234567890123}',
        '{"title": "T", "steps": ["x"], "priority": 1, "done": "yes"}',
        '{"title": "T", "steps": ["x"], "priority": 1, "done": "Off"}',
        '{"title": "T", "steps": ["x"], "priority": 1, "done": 2}',
        '{"title": "T", "steps": ["x"], "priority": 1, "done": 1.0}',
        '{"title": "T", "steps": ["x"], "priority": 1, "note": null}',
        '{"title": "T", "steps": ["x"], "priority": 1, "confidence": null}',
        '{"title": "A", "title": "B", "steps": ["x"], "priority": 1}',
        '{"title": "T", "steps": ["x"], "priority": 1} trailing',
        '["not", "an", "object"]',
        '',
        'Sure! {"title": "T"}',
    ]),
    "Numbers": (Numbers, "{f} {i} {fs} {d} {oi}", [
        json.dumps({"f": f, "i": 1}) for f in FLOATS
    ] + [
        '{"f": "1.5", "i": "7"}',
        '{"f": " 2 ", "i": 1}',
        '{"f": true, "i": false}',
        '{"f": 1e400, "i": 1}',
        '{"f": "abc", "i": 1}',
        '{"f": 1000000000000000000, "i": 1}',
        '{"f": 123456789012345678, "i": 1}',
        '{"f": 1, "i": 1e2}',
        '{"f": 1, "i": -0}',
        '{"f": 1, "i": 1, "fs": [1, 2, "3"], "oi": null}',
    ]),
    "Flags": (Flags, "{b}/{level}/{s}", [
        json.dumps({"b": True, "s": s}) for s in STRINGS
    ] + [
        '{"b": "t", "level": 2}',
        '{"b": "1", "level": 3}',
        '{"b": 0, "level": 4}',
        '{"b": "maybe"}',
        '{"b": true, "level": "2"}',
    ]),
}


def main():
    out = {}
    for name, (cls, fmt, replies) in CASES.items():
        results = []
        for r in replies:
            try:
                m = cls.model_validate_json(r)
            except ValidationError:
                results.append({"reply": r, "error": True})
                continue
            results.append({"reply": r, "json": m.model_dump_json(), "text": fmt.format(**m.model_dump())})
        out[name] = {
            "schema": cls.model_json_schema(),
            "strict": to_strict_json_schema(cls),
            "format_string": fmt,
            "replies": results,
        }
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
