"""Writes tiktoken's token counts of sample texts, the fixture of agentd's
token counter (internal/tokencount/testdata/counts.json):

    go run ./test/autogen/tiktokencache test/autogen/.tiktoken-cache
    cd test/autogen && /work/autogen-env/python.sh tokencounts.py ../../internal/tokencount/testdata/counts.json

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


def main():
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
