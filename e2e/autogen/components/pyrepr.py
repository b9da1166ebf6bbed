"""Records Python's str(), repr() and json.dumps(ensure_ascii=False, compact) of
JSON documents as json.loads reads them: what agentd's pyfunc.Value must
give (internal/pyfunc/testdata/pyrepr.json, read by TestValueAsPython).

    /work/autogen-env/python.sh e2e/autogen/components/pyrepr.py internal/pyfunc/testdata/pyrepr.json
"""

import json
import sys

DOCS = [
    'null', 'true', 'false', '0', '-0', '12345678901234567890123456789', '1.0', '-2.5', '1e16', '1E-5', '0.0001',
    '123456789.123456789', '1e400', '-1e400', '2.5e-320',
    '"plain"', '"it\'s"', '"say \\"hi\\""', '"both \' and \\""', '"back\\\\slash"', '"tab\\tnew\\nline\\rret"',
    '"\\u0000\\u001f\\u007f\\u0080\\u009f"', '"\\u00a0nbsp \\u00e9 \\u2028 \\u200b \\ufeff"', '"\\ud83d\\ude00 emoji"',
    '"\\ue000 private"', '"\\u0378 unassigned"', '"\\b\\f"',
    '[]', '{}', '[1, "a", [null, true], {"k": 1.5}]', '{"b": 1, "a": {"z": [], "y": {}}, "b": 2}',
    '{"quote\'s": "v", "": ""}',
]


def main():
    out = []
    for d in DOCS:
        v = json.loads(d)
        out.append({"json": d, "str": str(v), "repr": repr(v), "dumps": json.dumps(v, ensure_ascii=False, separators=(",", ":"))})
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


main()
