"""Writes tiktoken's token counts of sample texts, the fixture of agentd's
token counter (internal/tokencount/testdata/counts.json):

    go run ./e2e/autogen/tiktokencache e2e/autogen/.tiktoken-cache
    cd e2e/autogen && /work/autogen-env/python.sh tokencounts.py ../../internal/tokencount/testdata/counts.json ../../internal/llm/testdata/message_tokens.json

tiktoken (0.9.0, Debian's, the one the AgentChat recorder runs) reads the
encodings from the cache agentd's embedded files filled: no network.
"""

import json
import os
import sys

os.environ["TIKTOKEN_CACHE_DIR"] = os.path.join(os.getcwd(), ".tiktoken-cache")

import tiktoken  # noqa: E402

TEXTS = [
    "",
    "Hello, world!",
    "Weather in Paris?",
    "  leading and trailing spaces  ",
    "line one\nline two\r\n\ttabbed",
    "Ünïcödé — “quotes” and emoji 🎉🚀 and 中文字符 and Ελληνικά",
    "numbers 1234567890 3.14159 -42 1e10",
    "camelCaseIdentifier snake_case_identifier kebab-case",
    "def reverse(s):\n    return s[::-1]\n",
    '{"city": "Paris", "days": [1, 2, 3], "nested": {"a": null}}',
    "I'm you're we'll they've it's HE'LL",
    "<|endoftext|> is special",
    "a" * 300,
    "Skipped 3 messages.",
    "    \n\n\n   \t  ",
]
MODELS = ["gpt-4o-mini", "gpt-4o", "gpt-4", "gpt-3.5-turbo-0125", "o3-mini", "text-davinci-003", "davinci", "unknown-model"]


def message_counts():
    """AgentChat's count_tokens_openai of model contexts (the OpenAI client's
    count_tokens): written to internal/llm/testdata/message_tokens.json."""
    from autogen_core import FunctionCall
    from autogen_core.models import AssistantMessage, FunctionExecutionResult, FunctionExecutionResultMessage, UserMessage
    from autogen_ext.models.openai._openai_client import count_tokens_openai

    contexts = [
        [UserMessage(content="Weather in Paris?", source="user")],
        [
            UserMessage(content="Weather in Paris?", source="user"),
            AssistantMessage(content=[FunctionCall(id="call_w", arguments='{"city": "Paris"}', name="get_weather")], source="scout"),
            FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id="call_w", content="Sunny, 21 C", is_error=False, name="get_weather")]),
            AssistantMessage(content="Sunny in Paris.", source="scout"),
        ],
        [
            AssistantMessage(
                content=[FunctionCall(id="c1", arguments='{"q": "caf\u00e9 \u2014 \U0001F389"}', name="search"), FunctionCall(id="c2", arguments="{}", name="now")],
                source="a",
                thought="Looking up two things.",
            ),
            FunctionExecutionResultMessage(
                content=[
                    FunctionExecutionResult(call_id="c1", content="r\u00e9sultat", is_error=False, name="search"),
                    FunctionExecutionResult(call_id="c2", content="14:05", is_error=False, name="now"),
                ]
            ),
            UserMessage(content="Skipped 3 messages.", source="System"),
            UserMessage(content="ünïcödé 中文 \n\t tabs", source="critic"),
        ],
        [],
    ]
    out = []
    for msgs in contexts:
        for model in ["gpt-4o-mini", "gpt-4", "unknown-model"]:
            out.append({"model": model, "messages": [m.model_dump(mode="json") for m in msgs], "tokens": count_tokens_openai(msgs, model)})
    return out


def main():
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump(message_counts(), f, indent=1, ensure_ascii=False)
            f.write("\n")
    out = {"encodings": {}, "counts": []}
    for m in MODELS:
        try:
            out["encodings"][m] = tiktoken.encoding_for_model(m).name
        except KeyError:
            out["encodings"][m] = None
    for name in ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"]:
        enc = tiktoken.get_encoding(name)
        for t in TEXTS:
            out["counts"].append({"encoding": name, "text": t, "tokens": len(enc.encode(t, disallowed_special=()))})
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
