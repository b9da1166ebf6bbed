"""agentd: a client of the agentd server, which runs AutoGen-style
multi-agent group chats as a durable HTTP service.

:class:`Client` (sync) and :class:`AsyncClient` (asyncio) cover the HTTP API
(api/openapi.yaml); :mod:`agentd.autogen` runs AgentChat teams on agentd
behind AgentChat's own team interface (it imports AgentChat only when it is
imported itself).
"""

from ._async_client import AsyncClient, AsyncEventStream
from ._client import Client, EventStream
from ._errors import (
    AgentdError,
    APIConnectionError,
    APIError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ContentTooLargeError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    Problem,
    RateLimitError,
    RunActiveError,
    RunFailedError,
    UnavailableError,
    UnsupportedMediaTypeError,
    ValidationError,
)
from ._sse import TERMINAL_EVENTS, Event
from ._types import (
    Approval,
    Chat,
    ChatList,
    ForkedFrom,
    IfBusy,
    Message,
    MessageList,
    OutputSchema,
    PendingInput,
    RunPosted,
    RunRequest,
    Task,
    TaskMessage,
)
from ._version import API_VERSION, __version__

__all__ = [
    "API_VERSION",
    "APIConnectionError",
    "APIError",
    "AgentdError",
    "Approval",
    "AsyncClient",
    "AsyncEventStream",
    "AuthenticationError",
    "BadRequestError",
    "Chat",
    "ChatList",
    "Client",
    "ConflictError",
    "ContentTooLargeError",
    "Event",
    "EventStream",
    "ForkedFrom",
    "IfBusy",
    "InternalServerError",
    "Message",
    "MessageList",
    "NotFoundError",
    "OutputSchema",
    "PendingInput",
    "PermissionDeniedError",
    "Problem",
    "RateLimitError",
    "RunActiveError",
    "RunFailedError",
    "RunPosted",
    "RunRequest",
    "TERMINAL_EVENTS",
    "Task",
    "TaskMessage",
    "UnavailableError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "__version__",
]
