"""Context variables against the real agentd binary: given at create, with a
run, a fork and a patch between runs; refused during a run; every change an
event of the chat's stream."""

from __future__ import annotations

from typing import Callable

import pytest

import agentd
from support import Agentd, Scripted


def client_for(server: Agentd) -> agentd.Client:
    return agentd.Client(server.url, reconnect_delay=0.05)


SPEC = {
    "task": "My lamp broke.",
    "max_round": 1,
    "context_variables": {"customer": "Ada", "tier": "gold", "severity": None},
    "agents": [{"name": "sales", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"},
                "system_message_template": "Customer {customer} ({tier}), severity {severity}."}],
}


def system_messages(s: Scripted) -> list[str]:
    return [r["messages"][0]["content"] for r in s.model.requests]


def test_context_variables_across_runs_patches_and_forks(scripted: Callable[..., Scripted]) -> None:
    s = scripted(["one", "two", "three", "four"], gated=(2,))
    with client_for(s.server) as c:
        chat = c.create(SPEC, wait_s=30)
        assert chat["context_variables"] == {"customer": "Ada", "tier": "gold"}
        assert c.get(chat["id"])["context_variables"] == {"customer": "Ada", "tier": "gold"}

        patched = c.patch(chat["id"], context_variables={"tier": None, "severity": 9}, metadata={"ticket": "T-1"})
        assert patched["context_variables"] == {"customer": "Ada", "severity": 9}
        assert patched["metadata"] == {"ticket": "T-1"}

        # A run's variables merge as it starts; during it a patch is refused.
        posted = c.start_run(chat["id"], "Still broken.", context_variables={"tier": "silver"})
        s.asked(2)
        with pytest.raises(agentd.RunActiveError):
            c.patch(chat["id"], context_variables={"severity": 1})
        s.gates[2].set()
        list(c.events(chat["id"], until_run=posted["posted_run"]))
        assert system_messages(s) == ["Customer Ada (gold), severity .", "Customer Ada (silver), severity 9."]

        # A fork takes the source's variables as of its seq, and its own.
        fork = c.fork(chat["id"], context_variables={"customer": "Bo"},
                      run={"task": "Again.", "context_variables": {"severity": 2}})
        list(c.events(fork["id"], until_run=3))
        assert c.get(fork["id"])["context_variables"] == {"customer": "Bo", "severity": 2, "tier": "silver"}
        assert system_messages(s)[-1] == "Customer Bo (silver), severity 2."

        changes = [e.data["by"] for e in c.events(fork["id"], until_run=3) if e.event == "context.updated"]
        assert changes == [{"client": "create"}, {"client": "patch"}, {"client": "run"},
                           {"client": "fork"}, {"client": "run"}]

        with pytest.raises(agentd.ValidationError) as bad:
            c.patch(chat["id"], context_variables={"": 1})
        assert [p.path for p in bad.value.errors] == ["/context_variables/"]
        with pytest.raises(ValueError):
            c.patch(chat["id"])
