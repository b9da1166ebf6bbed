"""The base client needs no AutoGen: ``import agentd`` never imports
AgentChat, and only ``agentd.autogen`` does."""

from __future__ import annotations

import subprocess
import sys


def test_agentd_does_not_import_agentchat() -> None:
    code = (
        "import sys, agentd\n"
        "c = agentd.Client('http://127.0.0.1:9')\n"
        "assert not [m for m in sys.modules if m.startswith(('autogen_agentchat', 'autogen_core'))]\n"
        "try:\n"
        "    import autogen_agentchat\n"
        "except ImportError:\n"
        "    try:\n"
        "        import agentd.autogen\n"
        "    except ImportError as e:\n"
        "        assert e.name.startswith('autogen_'), e.name\n"
        "    else:\n"
        "        raise AssertionError('agentd.autogen imported without AgentChat')\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=_root())
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def _root() -> str:
    import pathlib

    return str(pathlib.Path(__file__).resolve().parents[1])
