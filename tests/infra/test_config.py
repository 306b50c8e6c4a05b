"""What `cdk deploy -c key=value` turns into: read the way app.py reads it, no synth needed."""

from __future__ import annotations

import re
from typing import Any

import pytest

from infra.config import ConfigError, StackConfig


def from_context(**context: Any) -> StackConfig:
    return StackConfig.from_context(context.get)


def test_the_retired_layer_version_option_is_refused_not_ignored() -> None:
    with pytest.raises(ConfigError, match=re.escape("pyproject.toml")):
        from_context(stage="dev", powertoolsLayerVersion="27")
