#!/usr/bin/env python3
"""CDK entry point: wires configuration to the stack. No AWS calls at synth."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import StackConfig
from infra.stack import UmavezStack

app = cdk.App()
config = StackConfig.from_context(app.node.try_get_context)
UmavezStack(app, f"Umavez-{config.stage}", config=config)
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
