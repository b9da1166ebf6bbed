"""The JSON objects of the API as typed dictionaries (api/openapi.yaml is
their definition). Responses are plain dicts: these types only describe them
to a type checker."""

from __future__ import annotations

from typing import Any, Dict, List, NotRequired, Optional, TypedDict, Union


class Usage(TypedDict):
    """Token usage."""

    prompt_tokens: int
    completion_tokens: int


class PendingInput(TypedDict):
    """What a chat in ``awaiting_input`` waits for."""

    request_id: str
    kind: str
    reason: str
    agent: NotRequired[str]
    candidates: NotRequired[List[str]]
    tool_calls: NotRequired[List[Dict[str, Any]]]
    code_blocks: NotRequired[List[Dict[str, Any]]]
    expires_at: NotRequired[str]


class Chat(TypedDict):
    """A chat object."""

    id: str
    name: Optional[str]
    status: str
    stop_reason: Optional[str]
    stop_detail: Optional[str]
    error: Optional[str]
    turns: int
    message_count: int
    last_seq: int
    usage: Usage
    pending_input: Optional[PendingInput]
    created_at: str
    updated_at: str
    completed_at: Optional[str]
    metadata: Optional[Dict[str, Any]]
    spec: NotRequired[Dict[str, Any]]
    warnings: NotRequired[List[Dict[str, str]]]
    run: NotRequired[int]


class ChatList(TypedDict):
    """A page of chats, newest first."""

    chats: List[Chat]
    next_cursor: Optional[str]


class ToolCallFunction(TypedDict):
    """The function of a tool call; arguments are a JSON string."""

    name: str
    arguments: str


class ToolCall(TypedDict):
    """A function call requested by a model."""

    id: str
    type: str
    function: ToolCallFunction


class ToolResponse(TypedDict):
    """The answer to one tool call."""

    tool_call_id: str
    role: str
    content: str
    is_error: NotRequired[bool]


class Message(TypedDict):
    """A message of a chat's log; ``type`` is AgentChat's name for it."""

    seq: int
    type: str
    role: str
    name: str
    content: str
    created_at: str
    tool_calls: NotRequired[List[ToolCall]]
    tool_responses: NotRequired[List[ToolResponse]]
    code_result: NotRequired[Dict[str, Any]]
    handoff: NotRequired[str]
    usage: NotRequired[Usage]
    thought: NotRequired[str]


class MessageList(TypedDict):
    """A page of messages and the seq to continue after."""

    messages: List[Message]
    last_seq: int
    status: str


class Approval(TypedDict, total=False):
    """The answer to one call of a pending approval: approve or reject it
    (with a reason), optionally with edited arguments."""

    tool_call_id: str
    approve: bool
    arguments: Union[str, Dict[str, Any]]
    reason: str


#: A run's task: a text, one message object or several.
Task = Union[str, Dict[str, Any], List[Dict[str, Any]]]
