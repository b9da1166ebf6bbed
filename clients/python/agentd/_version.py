"""The package's version: the version of the HTTP API it speaks.

It is ``info.version`` of the server's ``api/openapi.yaml``; a test checks
that the two agree, so a change of the contract changes the package version.
"""

__version__ = "1.0.0"
API_VERSION = __version__
