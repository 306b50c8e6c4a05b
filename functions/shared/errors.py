"""Typed errors. `RetryableError`s mean "try this record again later"; the rest go to the DLQ."""

from __future__ import annotations


class UmavezError(Exception):
    """Base of every error this project raises on purpose."""


class RetryableError(UmavezError):
    """Transient: the record is failed so SQS redelivers it after its visibility timeout."""


class MalformedEventError(UmavezError):
    """The payload is not an event we can read; retrying cannot help, so it ends in the DLQ."""


class UnknownProviderError(MalformedEventError):
    """The message names a provider this deployment does not know."""


class OrderNotYetKnownError(RetryableError):
    """The effect belongs to an object no order is bound to yet; never guess, wait for it.

    `objects` are the provider objects a binding would name; `summary` what the entry is
    (transition, object, amount), kept with the delivery while it waits.
    """

    def __init__(
        self, detail: str, objects: tuple[str, ...] = (), summary: dict[str, object] | None = None
    ) -> None:
        super().__init__(detail)
        self.objects = objects
        self.summary = summary or {}


class WriteContendedError(RetryableError):
    """DynamoDB cancelled the transaction for conflict or throttling; nothing was written."""


class BindingConflictError(UmavezError):
    """A provider object is bound to another order than the one this delivery names."""

    def __init__(self, detail: str, bound_order: str | None) -> None:
        super().__init__(detail)
        self.bound_order = bound_order


class CurrencyMismatchError(UmavezError):
    """An effect in a currency other than its order's: the totals would stop meaning money."""


class UnexpectedWriteError(UmavezError):
    """A write failed for a reason we do not classify; the record goes to the DLQ."""


class SettingsError(UmavezError):
    """A function's environment does not hold what the stack should have set."""
