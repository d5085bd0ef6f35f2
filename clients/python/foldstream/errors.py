"""The exceptions of the foldstream client.

Every exception derives from :class:`FoldstreamError`. The service's
answers each have their class: :class:`BadRequestError` (400, with the
field), :class:`UnknownSessionError` (404), :class:`UnavailableError`
(503, with the reason), :class:`InternalServiceError` (500);
:class:`RequestTimeoutError` and :class:`NoRespondersError` say that no
answer came.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "FoldstreamError", "ValidationError", "ServiceError", "BadRequestError", "UnknownSessionError",
    "UnavailableError", "InternalServiceError", "RequestTimeoutError", "NoRespondersError",
    "PublishError", "PublishTimeoutError", "BatchPublishError", "ConnectionClosedError",
    "ConnectionLostError", "AuthorizationError", "PermissionViolationError", "InboxPermissionError", "MissingExtraError",
]


class FoldstreamError(Exception):
    """The base class of every error this package raises."""


class ValidationError(FoldstreamError, ValueError):
    """An event or request the processor would refuse; nothing was sent.

    ``field`` names the field ("turn_id", "config.batch_size", "payload"),
    ``code`` is the processor's rejection code (missing_field,
    invalid_field, bad_session, oversized, unsupported_version, ...), and
    ``reason`` says what was expected.
    """

    def __init__(self, code: str, field: str, reason: str) -> None:
        self.code = code
        self.field = field
        self.reason = reason
        super().__init__(f'field "{field}": {reason}' if field else reason)


_FIELD = re.compile(r'field "([^"]+)"')


class ServiceError(FoldstreamError):
    """An error answer of the processor's service (header Nats-Service-Error-Code)."""

    code: str = ""

    def __init__(self, code: str, description: str) -> None:
        self.code = code
        self.description = description
        super().__init__(f"foldstream service: {code} {description}")

    @staticmethod
    def from_reply(code: str, description: str) -> ServiceError:
        """The ServiceError subclass for code."""
        cls = {"400": BadRequestError, "404": UnknownSessionError, "503": UnavailableError,
               "500": InternalServiceError}.get(code, ServiceError)
        return cls(code, description)


class BadRequestError(ServiceError):
    """400: the service refused the request; ``field`` names the field (or "")."""

    def __init__(self, code: str, description: str) -> None:
        super().__init__(code, description)
        m = _FIELD.search(description)
        self.field = m.group(1) if m else ""


class UnknownSessionError(ServiceError):
    """404: the processor has no checkpoint of this session (yet)."""


class UnavailableError(ServiceError):
    """503: the session is quarantined and rebuilt at its next event; ``reason`` says why."""

    def __init__(self, code: str, description: str) -> None:
        super().__init__(code, description)
        self.reason = description


class InternalServiceError(ServiceError):
    """500: the processor failed to answer (see its logs)."""


class RequestTimeoutError(FoldstreamError, TimeoutError):
    """No answer within the timeout."""


class NoRespondersError(FoldstreamError):
    """Nobody listens on the subject: no processor with --service, or no stream."""


class PublishError(FoldstreamError):
    """An event the stream did not acknowledge: publish it again (its Nats-Msg-Id makes that safe)."""

    def __init__(self, message: str, *, session: str = "", turn_id: str = "", subject: str = "",
                 cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.session = session
        self.turn_id = turn_id
        self.subject = subject
        self.cause = cause


class PublishTimeoutError(PublishError, RequestTimeoutError):
    """An event not acknowledged within ``ack_timeout``: a PublishError (publish it again) that is also a
    RequestTimeoutError (no answer in time), so that either ``except`` catches it."""


class BatchPublishError(FoldstreamError):
    """Some events of a batch were not acknowledged.

    ``not_acknowledged`` holds ``(event, error)`` pairs in batch order,
    ``acknowledged`` the ``(event, PubAck)`` pairs of the events stored.
    """

    def __init__(self, message: str, not_acknowledged: list[tuple[Any, BaseException]],
                 acknowledged: list[tuple[Any, Any]]) -> None:
        super().__init__(message)
        self.not_acknowledged = not_acknowledged
        self.acknowledged = acknowledged


class ConnectionClosedError(FoldstreamError):
    """The connection is closed (or no server could be reached)."""


class ConnectionLostError(FoldstreamError):
    """The connection dropped before the answer came; the client reconnects."""


class AuthorizationError(FoldstreamError):
    """The server refused the credentials."""


class PermissionViolationError(FoldstreamError, PermissionError):
    """The server refused a publish or subscription (NATS permissions)."""


class InboxPermissionError(PermissionViolationError):
    """The server refused the subscription to this client's reply inbox.

    ``inbox_prefix`` is the prefix in use; ``expected`` the one the shipped
    auth configs grant, ``_INBOX_<user>``: connect with
    ``inbox_prefix=expected``.
    """

    def __init__(self, message: str, *, inbox_prefix: str, expected: str) -> None:
        super().__init__(message)
        self.inbox_prefix = inbox_prefix
        self.expected = expected


class MissingExtraError(FoldstreamError, ImportError):
    """An optional dependency is needed for this feature (the message names it)."""
