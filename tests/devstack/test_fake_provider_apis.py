"""The fake Mercado Pago and Asaas APIs take a payment from outside, as `umavez send`
registers it; the fake Asaas API lists its payments by day and its webhooks, as Asaas does."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from devstack.fake_registration import (
    FakeApiError,
    register_asaas_payment,
    register_asaas_webhook,
    register_mercadopago_payment,
)
from devstack.provider_apis import FakeProviderApis
from devstack.resources import ASAAS_DEVELOPMENT_API_KEY, MERCADOPAGO_DEVELOPMENT_TOKEN
from functions.asaas.api import AsaasApi, ProviderApiRefusedError

TOKEN = MERCADOPAGO_DEVELOPMENT_TOKEN


@pytest.fixture
def fake() -> Iterator[FakeProviderApis]:
    apis = FakeProviderApis().start()
    yield apis
    apis.stop()


def get_payment(fake: FakeProviderApis, payment_id: str) -> object:
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{fake.url}/v1/payments/{payment_id}", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
        return json.load(response)


def test_a_registered_payment_is_what_the_api_answers_and_a_second_replaces_it(
    fake: FakeProviderApis,
) -> None:
    # Given the fake knows no payment 42
    # When payment 42 is registered approved, then again refunded
    first = register_mercadopago_payment(fake.url, TOKEN, {"id": 42, "status": "approved"})
    second = register_mercadopago_payment(fake.url, TOKEN, {"id": 42, "status": "refunded"})

    # Then the first was new and the second was not, and GET answers the latest
    assert (first, second) == (True, False)
    assert get_payment(fake, "42") == {"id": 42, "status": "refunded"}


def test_a_wrong_token_registers_nothing(fake: FakeProviderApis) -> None:
    # When a payment is registered with another token, Then it is refused and not kept
    with pytest.raises(FakeApiError, match="401"):
        register_mercadopago_payment(fake.url, "APP_USR-someone-else", {"id": 7, "status": "x"})
    assert fake.payments == {}


def test_a_body_naming_another_payment_than_its_path_is_refused(fake: FakeProviderApis) -> None:
    # When the body's id differs from the path's, Then 400 and nothing kept
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{fake.url}/__fake__/v1/payments/8",
        data=json.dumps({"id": 9}).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)  # noqa: S310
    assert refused.value.code == 400
    assert fake.payments == {}


def test_no_fake_listening_is_a_clear_error() -> None:
    # Given a stopped fake, When a payment is registered, Then the error says to start serve
    apis = FakeProviderApis().start()
    url = apis.url
    apis.stop()
    with pytest.raises(FakeApiError, match="umavez serve"):
        register_mercadopago_payment(url, TOKEN, {"id": 1, "status": "approved"})


def test_an_asaas_payment_registered_from_outside_is_what_process_reads(
    fake: FakeProviderApis,
) -> None:
    # Given the fake knows no Asaas payment
    payment = {"id": "pay_fake0001", "value": 50, "status": "RECEIVED", "externalReference": "o1"}

    # When it is registered received, then again refunded, with the development key
    first = register_asaas_payment(fake.url, ASAAS_DEVELOPMENT_API_KEY, payment)
    second = register_asaas_payment(
        fake.url, ASAAS_DEVELOPMENT_API_KEY, {**payment, "status": "REFUNDED"}
    )

    # Then Asaas's client reads the latest, with the key in `access_token`; a wrong key reads
    # nothing and registers nothing, and a payment nobody registered is unknown
    api = AsaasApi(lambda: ASAAS_DEVELOPMENT_API_KEY, fake.url, timeout_seconds=5)
    assert (first, second) == (True, False)
    assert api.payment("pay_fake0001") == {**payment, "status": "REFUNDED"}
    assert api.payment("pay_nobody") is None
    with pytest.raises(ProviderApiRefusedError):
        AsaasApi(lambda: "aact_someone_else", fake.url).payment("pay_fake0001")
    with pytest.raises(FakeApiError, match="401"):
        register_asaas_payment(fake.url, "aact_someone_else", {**payment, "id": "pay_other"})
    assert set(fake.asaas_payments) == {"pay_fake0001"}


def test_asaas_payments_are_listed_by_their_day_fields_and_paged(fake: FakeProviderApis) -> None:
    # Given three Asaas payments created on the 29th, one received that day and one the next,
    # one received on the 29th but deleted since, and one created on the 28th
    def payment(n: int, created: str, paid: str | None, **more: object) -> dict[str, object]:
        return {"id": f"pay_list{n}", "dateCreated": created, "paymentDate": paid, **more}

    for registered in (
        payment(1, "2026-11-29", "2026-11-29"),
        payment(2, "2026-11-29", "2026-11-30"),
        payment(3, "2026-11-29", "2026-11-29", deleted=True),
        payment(4, "2026-11-28", None),
    ):
        register_asaas_payment(fake.url, ASAAS_DEVELOPMENT_API_KEY, registered)
    api = AsaasApi(lambda: ASAAS_DEVELOPMENT_API_KEY, fake.url, timeout_seconds=5)

    def listed(query: str) -> tuple[list[object], object]:
        answer = api.get(f"/v3/payments?{query}", "listing") or {}
        return [p["id"] for p in answer["data"]], answer["hasMore"]

    # When they are listed by creation day, by payment day, and one a page
    # Then each listing holds the payments whose day is within its bounds, none deleted
    assert listed("dateCreated%5Bge%5D=2026-11-29&dateCreated%5Ble%5D=2026-11-29") == (
        ["pay_list1", "pay_list2"],
        False,
    )
    assert listed("paymentDate%5Bge%5D=2026-11-29&paymentDate%5Ble%5D=2026-11-29") == (
        ["pay_list1"],
        False,
    )
    assert listed("dateCreated%5Ble%5D=2026-11-29&offset=1&limit=1") == (["pay_list2"], True)


def test_asaas_webhooks_registered_from_outside_are_what_the_webhooks_api_answers(
    fake: FakeProviderApis,
) -> None:
    # Given a webhook registered with its queue running, then again with its queue paused
    webhook = {
        "id": "wh_fake0001",
        "name": "umavez",
        "url": "https://hooks.example.com/webhooks/asaas",
        "enabled": True,
        "interrupted": False,
        "apiVersion": 3,
        "sendType": "SEQUENTIALLY",
        "events": ["PAYMENT_RECEIVED"],
    }
    first = register_asaas_webhook(fake.url, ASAAS_DEVELOPMENT_API_KEY, webhook)
    second = register_asaas_webhook(
        fake.url, ASAAS_DEVELOPMENT_API_KEY, {**webhook, "interrupted": True}
    )

    # Then the webhooks API lists it, and answers it by id, as last registered
    api = AsaasApi(lambda: ASAAS_DEVELOPMENT_API_KEY, fake.url, timeout_seconds=5)
    paused = {**webhook, "interrupted": True}
    assert (first, second) == (True, False)
    listed = api.get("/v3/webhooks?offset=0&limit=100", "listing webhooks") or {}
    assert (listed["data"], listed["hasMore"]) == ([paused], False)
    assert api.get("/v3/webhooks/wh_fake0001", "reading a webhook") == paused
    assert api.get("/v3/webhooks/wh_nobody", "reading a webhook") is None
    # And a wrong key registers nothing
    with pytest.raises(FakeApiError, match="401"):
        register_asaas_webhook(fake.url, "aact_someone_else", {**webhook, "id": "wh_other"})
    assert set(fake.asaas_webhooks) == {"wh_fake0001"}
