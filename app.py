#!/usr/bin/env python3
"""CDK entry point: wires configuration to the stack. No AWS calls at synth."""

from __future__ import annotations

import sys

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import ConfigError, StackConfig
from infra.stack import UmavezStack

app = cdk.App()
try:
    config = StackConfig.from_context(app.node.try_get_context)
except ConfigError as exc:
    sys.exit(f"umavez: {exc}")  # the message is the fix; a traceback would bury it
UmavezStack(app, f"Umavez-{config.stage}", config=config)
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
