"""What a stack deletion, a replacement and a failed first create do to the data it holds."""

from __future__ import annotations

import aws_cdk as cdk


def kept(retain: bool) -> cdk.RemovalPolicy:
    """Kept on delete and on replacement, but removed when the stack's own create rolls back.

    CloudFormation keeps a `Retain` resource even when the create that made it fails; one with a
    fixed name (the secrets `umavez/<stage>/...`, the webhook queue `<stack>-webhooks`) then
    makes every retry of the first deploy fail with "already exists". A resource a failed create
    made holds nothing yet, so removing it loses nothing (`RetainExceptOnCreate`)."""
    return cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if retain else cdk.RemovalPolicy.DESTROY


def kept_protected(retain: bool) -> cdk.RemovalPolicy:
    """For the deletion-protected tables: plain `Retain`. A rollback cannot delete a table with
    deletion protection on (it would leave the stack in ROLLBACK_FAILED), and the tables have
    generated names, so a retry creates new ones; a failed first create leaves two empty tables
    to delete by hand (docs/deploy.md)."""
    return cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY
