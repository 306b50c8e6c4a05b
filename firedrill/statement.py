"""The drill's Stripe books: the balance transactions Stripe keeps for what the stories moved,
and the statement pass that books what their webhooks never brought.

Stripe's balance holds a line per movement whether or not any webhook announced it. The drill
builds it from the provider objects the stories' events carry, each at its last state (a
payment as captured in all, a refund as it ended, a dispute as decided), plus the lines of the
movements a story's webhooks lost for good (`Story.stripe_balance`). Forged events and events
of the other mode moved nothing. Fees are Stripe's Brazilian card price (3.99% + R$0.39) and
its R$15 dispute fee.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from devstack.fake_registration import (
    register_asaas_payment,
    register_asaas_transaction,
    register_mercadopago_payment,
    register_stripe_object,
)
from devstack.resources import (
    ASAAS_DEVELOPMENT_API_KEY,
    MERCADOPAGO_DEVELOPMENT_TOKEN,
    STRIPE_DEVELOPMENT_API_KEY,
)
from devstack.stack import EmbeddedStack
from firedrill.checks import Check
from firedrill.story import Post, Story
from fixtures.shapes import unique
from functions.asaas.models import BRAZIL
from functions.asaas.models import MONEY_IN as ASAAS_MONEY_IN
from functions.shared.errors import UmavezError
from functions.statement.report import MOVEMENT_MISSING, StatementReport
from functions.statement.sources import SCHEDULED

DISPUTE_FEE = 1500
CLOSED_WITHOUT_MONEY = frozenset({"warning_needs_response", "warning_under_review"})
NO_DISPUTE_LINE = CLOSED_WITHOUT_MONEY | {"warning_closed", "prevented"}


def card_fee(amount: int) -> int:
    return amount * 399 // 10_000 + 39


def stripe_books(story: Story) -> list[dict[str, Any]]:
    """The balance transactions of the story's Stripe movements (see the module's doc), each
    dated at the story's first Stripe event (the movements of one story are hours apart at
    most; the pass reads them in one window)."""
    moved = [p for p in story.posts if _moved(p)]
    if not moved and not story.stripe_balance:
        return []
    at = min((int(json.loads(p.announced)["created"]) for p in moved), default=0)
    objects = _last_states(moved)
    lines = [
        _line(charge, "charge", _captured(charge), at, card_fee(_captured(charge)))
        for charge in _payments(objects)
    ]
    refunds = {r["id"]: r for r in objects.get("refund", [])}
    for listed in story.stripe_refunds.values():
        refunds.update({r["id"]: r for r in listed})
    for charge in objects.get("charge", []):
        refunds.update({r["id"]: r for r in (charge.get("refunds") or {}).get("data", [])})
    for refund in refunds.values():
        lines.append(_line(refund, "refund", -int(refund["amount"]), at))
        if refund.get("status") in ("failed", "canceled"):
            lines.append(_line(refund, "refund_failure", int(refund["amount"]), at))
    for dispute in objects.get("dispute", []):
        if dispute.get("status") in NO_DISPUTE_LINE:
            continue
        lines.append(_line(dispute, "dispute", -int(dispute["amount"]), at, DISPUTE_FEE))
        if dispute.get("status") == "won":
            lines.append(_line(dispute, "dispute_reversal", int(dispute["amount"]), at))
    return lines + story.stripe_balance


def _moved(post: Post) -> bool:
    return post.provider == "stripe" and post.forgery is None and not post.other_mode


def _last_states(posts: Iterable[Post]) -> dict[str, list[dict[str, Any]]]:
    """Each object the events carried, by its `object` type, at its latest event."""
    latest: dict[str, tuple[int, dict[str, Any]]] = {}
    for post in posts:
        event = json.loads(post.announced)
        carried = event.get("data", {}).get("object", {})
        if "id" not in carried:
            continue
        seen = latest.get(carried["id"])
        if seen is None or seen[0] <= int(event["created"]):
            latest[carried["id"]] = (int(event["created"]), carried)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for _, carried in latest.values():
        by_type.setdefault(str(carried.get("object")), []).append(carried)
    return by_type


def _payments(objects: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One captured charge per payment, as Stripe's balance expands it: the charge the events
    carried, or the one its PaymentIntent, Checkout Session or invoice payment names."""
    charges: dict[str, dict[str, Any]] = {}
    for charge in objects.get("charge", []):
        if charge.get("captured"):
            payment = str(charge.get("payment_intent") or charge["id"])
            if _captured(charge) >= _captured(charges.get(payment, {})):
                charges[payment] = charge
    intents = {i["id"]: i for i in objects.get("payment_intent", []) if i.get("amount_received")}
    for intent in intents.values():
        received = int(intent["amount_received"])
        known = charges.get(intent["id"])
        if known is None or _captured(known) < received:
            charges[intent["id"]] = _charge_of(intent["id"], received, intent, known)
        # The PaymentIntent's order is the payment's: a charge copying another is a conflict.
        charges[intent["id"]]["metadata"] = intent.get("metadata") or {}
    for session in objects.get("checkout.session", []):
        intent_id = session.get("payment_intent")
        if session.get("payment_status") == "paid" and intent_id and intent_id not in charges:
            charges[intent_id] = _charge_of(intent_id, int(session["amount_total"]), session, None)
    for paid in objects.get("invoice_payment", []):
        intent_id = (paid.get("payment") or {}).get("payment_intent")
        if paid.get("status") == "paid" and intent_id and intent_id not in charges:
            charges[intent_id] = _charge_of(intent_id, int(paid["amount_paid"]), paid, None)
    return list(charges.values())


def _charge_of(
    intent_id: str, captured: int, named_by: dict[str, Any], known: dict[str, Any] | None
) -> dict[str, Any]:
    charge: dict[str, Any] = (
        dict(known) if known else {"id": str(named_by.get("latest_charge") or unique("ch"))}
    )
    charge.update(
        {
            "object": "charge",
            "amount": max(captured, int(charge.get("amount", 0))),
            "amount_captured": captured,
            "captured": True,
            "currency": named_by["currency"],
            "metadata": {},
            "payment_intent": intent_id,
        }
    )
    return charge


def _captured(charge: dict[str, Any]) -> int:
    return int(charge.get("amount_captured") or charge.get("amount") or 0)


def _line(
    source: dict[str, Any], category: str, amount: int, created: int, fee: int = 0
) -> dict[str, Any]:
    """A balance transaction of `source`, as Stripe lists it with the source expanded."""
    kind = {"dispute": "adjustment", "dispute_reversal": "adjustment"}.get(category, category)
    return {
        "id": unique("txn"),
        "object": "balance_transaction",
        "amount": amount,
        "available_on": created + 2 * 86_400,
        "created": created,
        "currency": source["currency"],
        "exchange_rate": None,
        "fee": fee,
        "fee_details": [],
        "net": amount - fee,
        "reporting_category": category,
        "source": source,
        "status": "pending",
        "type": kind,
    }


@dataclass(frozen=True)
class StatementRun:
    report: StatementReport
    lines: list[dict[str, Any]]
    lost: dict[str, list[dict[str, Any]]]  # by order: the lines no webhook announced
    failed: str | None = None  # why the pass stopped, if it did


def read_the_statement(stack: EmbeddedStack, drill: Sequence[Story], at: int) -> StatementRun:
    """Stripe's balance given to its fake (the lost movements over HTTP, as from outside),
    then the stack's statement function over the drill's window, as an operator runs it."""
    api = stack.provider_apis
    lines: list[dict[str, Any]] = []
    lost: dict[str, list[dict[str, Any]]] = {}
    for story in drill:
        books = stripe_books(story)
        lines += books
        for line in books:
            if line in story.stripe_balance:
                source = line["source"]
                collection = {"charge": "charges", "refund": "refunds"}.get(
                    str(source["object"]), "disputes"
                )
                register_stripe_object(api.url, STRIPE_DEVELOPMENT_API_KEY, collection, source)
                by_id = {**line, "source": source["id"]}
                register_stripe_object(
                    api.url, STRIPE_DEVELOPMENT_API_KEY, "balance_transactions", by_id
                )
                lost.setdefault(story.order_id, []).append(line)
            else:
                api.balance_transactions[line["id"]] = line
    created = [int(line["created"]) for line in lines] or [at]
    # The window holds every line, and the stories' later events (hours after their first).
    return _run(stack, "stripe", min(created), max(created) + 4 * 3600, lost, lines)


def read_other_statements(stack: EmbeddedStack, drill: Sequence[Story]) -> list[StatementRun]:
    """Mercado Pago's payments and Asaas's statement, the never-notified stories' staged from
    outside over HTTP, then the statement function over the drill for each."""
    return [_mercadopago_run(stack, drill), _asaas_run(stack, drill)]


def _mercadopago_run(stack: EmbeddedStack, drill: Sequence[Story]) -> StatementRun:
    """Every payment the stories made, as Mercado Pago's API answers it now."""
    api, token, now = stack.provider_apis, MERCADOPAGO_DEVELOPMENT_TOKEN, int(time.time())
    lost: dict[str, Any] = {}
    for story in drill:
        if story.statement_only and story.mercadopago_payment:
            register_mercadopago_payment(api.url, token, story.mercadopago_payment)
            lost[story.order_id] = story.mercadopago_payment
    updated = [_moment(p["date_last_updated"]) for p in api.payments.values()] or [now]
    return _run(stack, "mercadopago", min(updated) - 86_400, now, lost)


def _asaas_run(stack: EmbeddedStack, drill: Sequence[Story]) -> StatementRun:
    """Each story's Asaas payments as its API answers them, and their lines on its statement."""
    api, key = stack.provider_apis, ASAAS_DEVELOPMENT_API_KEY
    lost: dict[str, Any] = {}
    days: list[str] = []
    for story in drill:
        for payment in story.asaas_answers.values():
            book = asaas_lines(payment)
            days += [str(line["date"]) for line in book]
            if not story.statement_only:
                api.asaas_transactions.update({line["id"]: line for line in book})
                continue
            register_asaas_payment(api.url, key, payment)
            for line in book:
                register_asaas_transaction(api.url, key, line)
            lost[story.order_id] = book
    today = datetime.now(tz=BRAZIL).date()
    first_day = (date.fromisoformat(min(days)) if days else today) - timedelta(days=1)
    since = int(datetime.combine(first_day, datetime.min.time(), BRAZIL).timestamp())
    return _run(stack, "asaas", since, int(time.time()), lost)


def _run(
    stack: EmbeddedStack,
    provider: str,
    since: int,
    until: int,
    lost: dict[str, Any],
    lines: list[dict[str, Any]] | None = None,
) -> StatementRun:
    """The statement function over [since, until), as an operator invokes it."""
    try:
        answer = stack.read_statement({"provider": provider, "since": since, "until": until})
    except UmavezError as exc:  # a broken design can make the ledger unbookable: a finding
        return StatementRun(StatementReport(provider, since, until), lines or [], lost, repr(exc))
    failed = answer["stopped"] or answer["not_configured"]
    [report] = [StatementReport.from_json(p) for p in answer["passes"]] or [
        StatementReport(provider, since, until)
    ]
    return StatementRun(report, lines or [], lost, failed)


@dataclass(frozen=True)
class HourlyPasses:
    check: Check
    last_windows: dict[str, str | None]  # by provider: the end of the last window read


def hourly_passes(stack: EmbeddedStack, conflicts: Iterable[str] = ()) -> HourlyPasses:
    """Each provider's scheduled run, as EventBridge starts it: its first window (the hour up
    to now, locally) read, its checkpoint moved, and nothing in it new or mismatched -- the
    drill's movements were all booked, by their webhooks or by the passes above."""
    problems, told, last = [], [], {}
    for provider in SCHEDULED:
        try:
            answer = stack.read_statement({"provider": provider})
        except UmavezError as exc:  # a broken design can make the ledger unbookable: a finding
            problems.append(f"{provider}: the pass failed: {exc!r}")
            continue
        reports = [StatementReport.from_json(p) for p in answer["passes"]]
        booked = sum(r.booked for r in reports)
        told_conflicts = conflicts if provider == "stripe" else ()
        problems += [f"{provider}: {p}" for r in reports for p in unexpected(r, told_conflicts)]
        problems += [f"{provider}: {booked} booked, none expected"] if booked else []
        if not answer["caught_up"] or answer["checked_until"] is None:
            problems.append(f"{provider}: not caught up ({answer['stopped']})")
        last[provider] = answer["passes"][-1]["until"] if answer["passes"] else None
        entries = sum(r.entries_checked for r in reports)
        told.append(f"{provider} {sum(r.lines_read for r in reports)} lines, {entries} entries")
    check = Check(
        "the hourly statement passes find everything booked and move their checkpoints",
        not problems,
        "; ".join(told) + ": nothing new, checkpoints moved"
        if not problems
        else "; ".join(problems[:3]),
    )
    return HourlyPasses(check, last)


def asaas_lines(payment: dict[str, Any]) -> list[dict[str, Any]]:
    """Asaas's statement lines of a payment (its receipt, Asaas's fee on it, each DONE refund),
    as `GET /v3/financialTransactions` lists them."""
    if payment.get("status") not in ASAAS_MONEY_IN or payment.get("deleted"):
        return []
    day = str(payment.get("paymentDate") or payment.get("dateCreated"))[:10]
    value = float(payment["value"])
    fee = round(value - float(payment.get("netValue") or value), 2)

    def line(kind: str, amount: float) -> dict[str, Any]:
        return {
            "object": "financialTransaction",
            "id": unique("ftn"),
            "value": amount,
            "type": kind,
            "date": day,
            "description": kind,
            "paymentId": payment["id"],
        }

    lines = [line("PAYMENT_RECEIVED", value), line("PAYMENT_FEE", -fee)]
    refunds = payment.get("refunds") or []
    lines += [
        line("PAYMENT_REVERSAL", -float(r["value"])) for r in refunds if r["status"] == "DONE"
    ]
    return lines


def _moment(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp())


def _instant(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


BOUND_ELSEWHERE = "; its payment is bound to order"


def unexpected(report: StatementReport, conflicts: Iterable[str]) -> list[str]:
    """The report's mismatches but the `movement_missing` of each charge naming another order
    than the one its payment is bound to (`conflicts`: the stories' such orders; the simulated
    lifecycles have theirs), whichever of the two orders its deliveries bound first."""
    expected = bool(list(conflicts))
    return [
        f"{m.kind} {m.order_id}: {m.detail}"
        for m in report.mismatches
        if not (expected and m.kind == MOVEMENT_MISSING and BOUND_ELSEWHERE in m.detail)
    ]


def statement_check(
    run: StatementRun, fees: dict[str, tuple[int, int]], conflicts: Iterable[str] = ()
) -> Check:
    """What the statement found is exactly what the webhooks lost; every other movement was
    booked already; nothing mismatched but each conflicting charge (`conflicts`: the orders they
    named); each order's fee is what its lines kept (`fees`: the order's fee_total and its
    lines' fees, by order)."""
    report = run.report
    lost = sum(len(lines) for lines in run.lost.values())
    problems = unexpected(report, conflicts)
    problems += [f"the pass stopped: {run.failed}"] if run.failed else []
    if report.provider != "stripe":
        lost = len(run.lost)  # one payment each
    problems += [
        f"{order_id}: fee_total {held}, its lines kept {kept}"
        for order_id, (held, kept) in sorted(fees.items())
        if held != kept
    ]
    found_orders = sorted({found.split(":")[0] for found in report.found})
    if found_orders != sorted(run.lost):
        problems.append(f"found on {found_orders[:3]}, lost on {sorted(run.lost)[:3]}")
    provider = {"stripe": "Stripe's balance", "mercadopago": "Mercado Pago's payments"}.get(
        report.provider, "Asaas's statement"
    )
    return Check(
        f"{report.provider}: the statement books what the webhooks lost, once; the rest matches",
        not problems and report.booked == lost,
        f"{report.lines_read} lines of {provider}: {report.booked} booked that no webhook "
        f"brought ({len(run.lost)} orders), {report.already_booked} already booked, "
        f"{report.pending} pending, {report.entries_checked} entries matched, fees on "
        f"{report.fees_recorded} lines"
        if not problems and report.booked == lost
        else f"{len(problems)} problems, {report.booked} booked of {lost} lost: "
        + "; ".join(problems[:3]),
    )
