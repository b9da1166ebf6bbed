"""Import-only stand-ins for Python packages AgentChat's optional extras need
at import time and that the AgentChat environment does not install (the
Docker SDK, the MCP SDK, asyncio_atexit, the Azure SDK, the Anthropic SDK), and the HTML
libraries AutoGen Studio's gallery tools import (bs4, html2text: their FunctionTools load, and
their schemas are read, without being called): it holds only what AgentChat's core needs, and
the MCP SDK and asyncio_atexit are not in Debian.

dump.py only builds components and dumps them; it never starts a container or
connects to an MCP server, so these modules only have to exist. Any name taken
from them is a placeholder class (a pydantic model that accepts any field), so
AgentChat's config models that refer to MCP types still validate and dump. A
placeholder never does anything when called.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

from pydantic import BaseModel, ConfigDict

STUBBED = ("docker", "mcp", "asyncio_atexit", "azure", "anthropic", "bs4", "html2text")


class _Placeholder(BaseModel):
    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def __class_getitem__(cls, _params):
        # Generic in the real SDK (RequestContext[ClientSession, Any]).
        return cls


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        if full in sys.modules:
            return sys.modules[full]
        if name[0].islower():
            # Lower-case names are submodules (mcp.types) or functions;
            # a stub module serves for both, since nothing is ever called.
            return importlib.import_module(full)
        cls = type(name, (_Placeholder,), {"__module__": self.__name__})
        setattr(self, name, cls)
        return cls


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] not in STUBBED:
            return None
        try:
            # A real package wins if the environment has one.
            if importlib.machinery.PathFinder.find_spec(fullname.split(".")[0]) is not None:
                return None
        except (ImportError, ValueError):
            pass
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        m = _Module(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


def install():
    """Make the stubbed packages importable (where no real one exists)."""
    sys.meta_path.append(_Finder())
