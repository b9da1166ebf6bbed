"""The JSON objects of the API as typed dictionaries (api/openapi.yaml is
their definition). Responses are plain dicts: these types only describe them
to a type checker."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, NotRequired, Optional, Required, TypedDict, Union


class Usage(TypedDict):
    """Token usage."""

    prompt_tokens: int
    completion_tokens: int


class PendingInput(TypedDict):
    """What a chat in ``awaiting_input`` waits for (also the data of an
    ``input.requested`` event). ``kind`` is ``message`` (a human message:
    ``agent`` asks), ``speaker`` (pick one of ``candidates``) or ``approval``
    (decide on ``agent``'s held ``tool_calls`` or ``code_blocks``)."""

    request_id: str
    kind: str
    reason: str
    agent: NotRequired[str]
    candidates: NotRequired[List[str]]
    tool_calls: NotRequired[List[Dict[str, Any]]]
    code_blocks: NotRequired[List[Dict[str, Any]]]
    expires_at: NotRequired[str]


class ForkedFrom(TypedDict):
    """Where a fork's log was copied from: the source chat and the last seq
    copied."""

    chat_id: str
    seq: int


class TeamRef(TypedDict):
    """A version of a saved team: the ``team`` of a chat created from one."""

    name: str
    version: int


class Chat(TypedDict):
    """A chat object. ``status``, ``stop_reason`` and ``stop_detail`` are
    those of its latest run, ``run`` that run's number, ``queued_runs`` the
    runs posted after it that have not started, ``team`` the saved team
    version it was created from (``None`` for other chats)."""

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
    run: int
    queued_runs: int
    forked_from: Optional[ForkedFrom]
    team: Optional[TeamRef]
    #: The chat's context variables as of ``last_seq``, in the answers
    #: about one chat (get, patch, fork, create); lists leave them out.
    context_variables: NotRequired[Dict[str, Any]]
    spec: NotRequired[Dict[str, Any]]
    warnings: NotRequired[List[Dict[str, str]]]


class RunPosted(Chat):
    """The answer to ``POST /v1/chats/{id}/runs``: the chat, and the number
    the posted run got (its ``run.started`` and terminal events carry it)."""

    posted_run: int


class ChatList(TypedDict):
    """A page of chats, newest first."""

    chats: List[Chat]
    next_cursor: Optional[str]


#: A MultiModalMessage's content: texts and images in order, each image
#: ``{"image": {"data": "<base64>", "media_type"?}}``.
MultiModalContent = List[Union[str, Dict[str, Any]]]

#: The content of a human message or a task message: a text, or texts and
#: images (a MultiModalMessage).
Content = Union[str, MultiModalContent]


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
    """A message of a chat's log; ``type`` is AgentChat's name for it. A
    ``StructuredMessage[T]`` (the reply of an assistant with an
    ``output_schema`` named T) has its object in ``structured`` and its text
    (the schema's ``format_string`` filled in, else the object's JSON) in
    ``content``. A ``MultiModalMessage`` has its texts and images in
    ``parts`` and their text (``<image>`` for each image) in ``content``; a
    message of a team agent's inner team names the team agent in ``team``."""

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
    structured: NotRequired[Dict[str, Any]]
    parts: NotRequired[MultiModalContent]
    team: NotRequired[str]


class OutputSchema(TypedDict, total=False):
    """An assistant's structured output in a spec (AgentChat's
    ``output_content_type``): the type's ``name`` and JSON ``schema``, an
    optional ``format_string`` for the replies' text, and the order of the
    schema's properties (filled in by the server when absent)."""

    name: Required[str]
    schema: Required[Dict[str, Any]]
    format_string: str
    property_order: List[str]


class MessageList(TypedDict):
    """A page of messages and the seq to continue after."""

    messages: List[Message]
    last_seq: int
    status: str


class Approval(TypedDict, total=False):
    """A decision on a pending approval: for each held tool call
    (``tool_call_id``) or, without one, for held code. ``approve`` it or
    not; ``arguments`` (an approved call only) replace the model's and are
    checked against the tool's schema; ``reason`` says why (a rejected
    call's error result quotes it)."""

    tool_call_id: str
    approve: Required[bool]
    arguments: Dict[str, Any]
    reason: str


class TaskMessage(TypedDict, total=False):
    """A message of a run's task: a ``TextMessage`` (``source`` defaults to
    ``user``), a ``HandoffMessage`` whose ``target`` the Swarm goes on
    with, or a ``MultiModalMessage`` whose ``content`` is a list of texts
    and images (``{"image": {"data": "<base64>", "media_type"?}}``)."""

    type: Required[Literal["TextMessage", "HandoffMessage", "MultiModalMessage"]]
    source: str
    content: Required[Content]
    target: str


#: A run's task: a text (a TextMessage from ``user``), one message or several.
Task = Union[str, TaskMessage, List[TaskMessage]]

#: What ``POST /runs`` does while a run is active or waits to start.
IfBusy = Literal["reject", "enqueue", "interrupt"]


class RunRequest(TypedDict, total=False):
    """The body of ``POST /v1/chats/{id}/runs``, and a fork's ``run``."""

    task: Optional[Task]
    if_busy: IfBusy
    max_round: int
    #: Merged into the chat's context variables as the run starts (a
    #: ``None`` value removes one).
    context_variables: Dict[str, Any]


class Webhook(TypedDict, total=False):
    """A chat's own webhook: the ``url`` its events are POSTed to, and the
    event types to send (default: the terminal ones, ``input.requested``
    and ``run.started``)."""

    url: Required[str]
    events: List[str]


class Team(TypedDict):
    """One immutable version of a saved team. ``spec`` is the chat spec
    without a task (left out of a list without ``include_spec``);
    ``warnings`` (the answer to saving an AgentChat component only) lists
    what of the component agentd ignores."""

    name: str
    version: int
    created_at: str
    spec: NotRequired[Dict[str, Any]]
    warnings: NotRequired[List[Dict[str, str]]]


class TeamList(TypedDict):
    """A page of saved teams (the latest version of each), by name."""

    teams: List[Team]
    next_cursor: Optional[str]


class Delivery(TypedDict):
    """One webhook delivery of one event to one URL. ``status`` is
    ``pending`` (until a 2xx answer, a 410 Gone or the end of the retry
    window), ``delivered`` or ``failed``; ``webhook_id`` is the
    ``webhook-id`` header of every attempt, ``<chat_id>.<seq>``;
    ``attempts`` counts the requests sent and ``last_attempt_by`` names the
    replica that sent the latest."""

    webhook_id: str
    seq: int
    url: str
    event: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    last_attempt_by: Optional[str]
    last_status_code: Optional[int]
    last_error: Optional[str]
    created_at: str
    updated_at: str
    next_attempt_at: Optional[str]
    delivered_at: Optional[str]


class DeliveryList(TypedDict):
    """The webhook deliveries of a chat's events, by seq and URL."""

    deliveries: List[Delivery]


#: A value a metadata filter matches: a string as it is, a number, ``True``,
#: ``False`` or ``None`` as JSON writes them.
MetadataValue = Union[str, int, float, bool, None]
