"""Fixtures: the real agentd binary (``AGENTD_BIN``, else ``bin/agentd`` of
the repository, which ``make test-python`` builds)."""

from __future__ import annotations

import os
import pathlib
from typing import Callable, Iterator

import pytest

from support import Agentd, Scripted

REPO = pathlib.Path(__file__).resolve().parents[3]


def agentd_binary() -> str:
    path = os.environ.get("AGENTD_BIN") or str(REPO / "bin" / "agentd")
    if not os.access(path, os.X_OK):
        msg = f"no agentd binary at {path}: build it (make build) or set AGENTD_BIN"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def agentd_bin() -> str:
    return agentd_binary()


@pytest.fixture(scope="session")
def server(agentd_bin: str) -> Iterator[Agentd]:
    """One agentd for the tests that need nothing special of it."""
    s = Agentd(agentd_bin)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def keyed_server(agentd_bin: str) -> Iterator[Agentd]:
    """An agentd with an API key (tenant ``team``)."""
    s = Agentd(agentd_bin, {"AGENTD_API_KEYS": "py-client-key-0123456789:team"})
    yield s
    s.stop()


@pytest.fixture
def scripted(agentd_bin: str) -> Iterator[Callable[..., Scripted]]:
    """Makes agentds whose OpenAI endpoint is a scripted model (see
    support.Scripted); stops them after the test."""
    made: list[Scripted] = []

    def make(replies: list[str], gated: tuple[int, ...] = ()) -> Scripted:
        made.append(Scripted(agentd_bin, replies, gated))
        return made[-1]

    yield make
    for m in made:
        m.close()
