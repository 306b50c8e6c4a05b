"""Reading an event's object as a model: strictly, field by field, on an API version newer
than the known ones; and the small pieces every rule of the event table builds its entries
with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, get_args

from functions.shared.domain import Delivery, Interpretation, Money, movement
from functions.stripe.models import OBJECT, ApiVersionFieldError, StripeEvent, StripeModel

Readings = tuple[Interpretation, ...]


def _model_in(annotation: Any) -> type[StripeModel] | None:
    """The Stripe model a field holds (itself, in a list or optional), if any."""
    if isinstance(annotation, type) and issubclass(annotation, StripeModel):
        return annotation
    for argument in get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _first_absent(model: type[StripeModel], value: object, path: str) -> str | None:
    """The path of the first field `model` needs that `value` lacks, nested objects too."""
    if isinstance(value, list):
        for n, item in enumerate(value):
            if (absent := _first_absent(model, item, f"{path}.{n}")) is not None:
                return absent
        return None
    if not isinstance(value, Mapping):
        return None  # null, or an id: its type is pydantic's to judge
    for name in model.needed(value):
        at = f"{path}.{name}"
        if name not in value:
            return at
        field = model.model_fields.get(name)
        nested = _model_in(field.annotation) if field is not None else None
        if nested is not None and (absent := _first_absent(nested, value[name], at)) is not None:
            return absent
    return None


_Model = TypeVar("_Model", bound=StripeModel)


def read_object(model: type[_Model], event: StripeEvent) -> _Model:
    """The event's object as `model`; on an API version newer than the known ones, only if
    every field the model needs is there (absent, it is refused, never read as a default)."""
    if event.api_version_unknown and event.api_version is not None:
        absent = _first_absent(model, event.data.object, OBJECT)
        if absent is not None:
            raise ApiVersionFieldError(absent, "absent", event.api_version)
    return model.model_validate(event.data.object)


@dataclass(frozen=True)
class EventRule:
    read: Callable[[StripeEvent, Delivery], Readings]


def money(minor: int, currency: str, field: str, what: str) -> Money:
    return movement(minor, currency, f"{OBJECT}.{field}", what)


def payment_refs(*object_ids: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(object_id for object_id in object_ids if object_id))
