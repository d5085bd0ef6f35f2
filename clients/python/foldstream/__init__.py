"""foldstream: the Python client of foldstream's wire contract v1.

A bot publishes every turn; a prompt builder asks for the packed context::

    import foldstream

    async with await foldstream.connect("nats://127.0.0.1:4222") as fs:
        await fs.publish_turn("s1", "t1", "Alice", "Hi, I'm planning a trip to Lisbon")
        await fs.wait_caught_up("s1")
        ctx = await fs.context("s1", query="where is Alice going?", budget_tokens=1000)
        messages = ctx.messages(system_prompt="You are a helpful assistant.")

The package has no runtime dependency: it speaks the NATS protocol itself
(foldstream._transport). nkey and .creds logins need PyNaCl (the
``nkeys`` extra).
"""

from ._validate import (
    MAX_CONTEXT_QUERY_CHARS,
    MAX_RECALL_LIMIT,
    MAX_RECALL_TURNS,
    WIRE_VERSION,
    Limits,
    check_config,
    valid_session,
    validate_event,
    validate_payload,
)
from ._watch import SummaryWatch
from .client import Client, connect, note_msg_id, service_subject, stream_name, turn_msg_id
from .errors import (
    AuthorizationError,
    BadRequestError,
    BatchPublishError,
    ConnectionClosedError,
    ConnectionLostError,
    FoldstreamError,
    InboxPermissionError,
    InternalServiceError,
    MissingExtraError,
    NoRespondersError,
    PermissionViolationError,
    PublishError,
    PublishTimeoutError,
    RequestTimeoutError,
    ServiceError,
    UnavailableError,
    UnknownSessionError,
    ValidationError,
)
from .types import (
    Context,
    ContextTurn,
    EvictionNote,
    LeaseInfo,
    MissingTurns,
    PubAck,
    Recall,
    RecalledItem,
    RecallResult,
    SessionInfo,
    SummaryLayer,
    SummaryUpdated,
    Turn,
    turn_line,
)

__version__ = "1.0.0"

__all__ = [
    "__version__", "connect", "Client", "SummaryWatch", "Limits", "WIRE_VERSION", "MAX_CONTEXT_QUERY_CHARS",
    "MAX_RECALL_LIMIT", "MAX_RECALL_TURNS", "valid_session", "validate_event", "validate_payload", "check_config",
    "turn_msg_id", "note_msg_id", "stream_name", "service_subject", "turn_line",
    "Turn", "PubAck", "Context", "ContextTurn", "SummaryLayer", "EvictionNote", "RecalledItem", "MissingTurns",
    "SessionInfo", "LeaseInfo", "Recall", "RecallResult", "SummaryUpdated",
    "FoldstreamError", "ValidationError", "ServiceError", "BadRequestError", "UnknownSessionError",
    "UnavailableError", "InternalServiceError", "RequestTimeoutError", "NoRespondersError", "PublishError",
    "PublishTimeoutError", "BatchPublishError", "ConnectionClosedError", "ConnectionLostError", "AuthorizationError",
    "PermissionViolationError", "InboxPermissionError", "MissingExtraError",
]
