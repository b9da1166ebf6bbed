"""Stand-in for the jsonref package, which Debian does not ship.

autogen_core imports jsonref only to inline "$defs" references of a tool's
argument schema (BaseTool.schema) and of structured output types. The
recorder's tools declare their schema directly and have no "$defs", so this
is never called; if it is, the run fails loudly instead of recording
something AutoGen would not send.
"""


def replace_refs(*args, **kwargs):
    raise NotImplementedError("jsonref is stubbed in the recorder's environment")
