"""The package's version is the API's (info.version of api/openapi.yaml)."""

from __future__ import annotations

import re

import agentd
from conftest import REPO


def test_version_is_the_api_version() -> None:
    text = (REPO / "api" / "openapi.yaml").read_text()
    info = re.search(r"^info:\n((?:[ ].*\n)+)", text, re.M)
    assert info is not None
    version = re.search(r"^  version: *['\"]?([^'\"\s]+)", info.group(1), re.M)
    assert version is not None
    assert agentd.__version__ == agentd.API_VERSION == version.group(1)
