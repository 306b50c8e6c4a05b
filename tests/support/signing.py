"""Sign requests the way each provider does; Stripe's own library is the oracle for Stripe."""

from __future__ import annotations

import hashlib
import hmac
import secrets

import stripe

from functions.mercadopago.signature import manifest


def generated_secret(prefix: str = "whsec_test_") -> str:
    return prefix + secrets.token_hex(24)


def stripe_signature(body: str, secret: str, timestamp: int) -> str:
    header: str = stripe.WebhookSignature.generate_signature_header(body, secret, timestamp)
    return header


def mercadopago_signature(data_id: str | None, request_id: str | None, ts: int, secret: str) -> str:
    signed = manifest(data_id, request_id, str(ts)).encode()
    return f"ts={ts},v1={hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()}"
