"""Why ingest refuses a request (itself, or a provider's signature check): each maps to one HTTP
status and one metric reason."""

from __future__ import annotations

from typing import ClassVar

from functions.shared.errors import UmavezError


class RejectedError(UmavezError):
    """The request is refused; the provider is told why and nothing is enqueued."""

    status: ClassVar[int] = 400

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class MalformedRequestError(RejectedError):
    status = 400


class UnauthenticatedError(RejectedError):
    status = 401


class UnknownRouteError(RejectedError):
    status = 404


class MethodNotAllowedError(RejectedError):
    status = 405


class PayloadTooLargeError(RejectedError):
    status = 413


class UnavailableError(UmavezError):
    """We could not take the request durably; a 5xx makes the provider retry it."""

    status: ClassVar[int] = 503

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
