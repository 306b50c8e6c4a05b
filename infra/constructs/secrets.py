"""One Secrets Manager secret per provider, created with no active secret: ingest answers
503 `secret_not_configured` (so the provider retries) until an operator sets it."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.removal import kept
from infra.settings import API_CREDENTIAL_PLACEHOLDER, WEBHOOK_SECRET_PLACEHOLDER


class ProviderSecrets(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        providers: Sequence[str],
        retain: bool,
        notify_signing: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        policy = kept(retain)
        self.webhook: dict[str, secretsmanager.Secret] = {}
        # Plain names, not the secrets' name tokens: those are parsed back out of the ARN.
        self.names_by_provider = {p: f"umavez/{stage}/{p}/webhook" for p in providers}
        self.mercadopago_access_token_name = f"umavez/{stage}/mercadopago/access-token"
        self.stripe_api_key_name = f"umavez/{stage}/stripe/api-key"
        self.asaas_api_key_name = f"umavez/{stage}/asaas/api-key"
        for provider in providers:
            secret = secretsmanager.Secret(
                self,
                f"{provider.capitalize()}Webhook",
                secret_name=self.names_by_provider[provider],
                description=f'{provider} webhook signing secrets: {{"active": ["newest", ...]}}',
                secret_string_value=cdk.SecretValue.unsafe_plain_text(WEBHOOK_SECRET_PLACEHOLDER),
                removal_policy=policy,
            )
            self.webhook[provider] = secret
        # Credentials process reads providers' APIs with, set by an operator after deploy.
        api_credential = functools.partial(
            secretsmanager.Secret,
            self,
            secret_string_value=cdk.SecretValue.unsafe_plain_text(API_CREDENTIAL_PLACEHOLDER),
            removal_policy=policy,
        )
        self.mercadopago_access_token = api_credential(
            "MercadopagoAccessToken",
            secret_name=self.mercadopago_access_token_name,
            description="Mercado Pago access token, to read payments named by notifications",
        )
        # Asaas's webhooks carry one static token and no signature: process books the payment
        # as Asaas's API answers it, read with this key (read access to payments is enough).
        self.asaas_api_key = api_credential(
            "AsaasApiKey",
            secret_name=self.asaas_api_key_name,
            description="Asaas API key, to read the payments its webhooks name",
        )
        # Read-only (restricted key, Refunds: read): needed by endpoints pinned to a Stripe
        # API version before 2024-10-28.acacia, whose charge.refunded names no refund.
        self.stripe_api_key = api_credential(
            "StripeApiKey",
            secret_name=self.stripe_api_key_name,
            description="Stripe restricted API key (Refunds: read), to list a charge's refunds",
        )
        # The HTTP sink's signing secrets (Standard Webhooks, `whsec_<base64>`), only when a
        # notifyUrl is set: nothing is sent to it unsigned, so until an operator sets one
        # its notifications back off (docs/notifications.md#rotate-the-secret).
        self.notify_signing_name = f"umavez/{stage}/notify/signing"
        self.notify_signing: secretsmanager.Secret | None = None
        if notify_signing:
            self.notify_signing = secretsmanager.Secret(
                self,
                "NotifySigning",
                secret_name=self.notify_signing_name,
                description='HTTP notification signing secrets: {"active": ["whsec_...", ...]}',
                secret_string_value=cdk.SecretValue.unsafe_plain_text(WEBHOOK_SECRET_PLACEHOLDER),
                removal_policy=policy,
            )
