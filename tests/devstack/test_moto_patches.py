"""The speed-ups fail loudly: a moto upgrade that moves or renames what a patch replaces stops
the server at start, naming it, instead of leaving the patch silently inert."""

from __future__ import annotations

import importlib.metadata

import pytest
from moto.sqs.models import SQSBackend

from devstack.speedups import moto_patches


def test_the_pinned_moto_has_every_attribute_the_patches_replace() -> None:
    # Given the moto pyproject.toml pins, When the patches are checked, Then nothing is missing
    moto_patches.check()


def test_an_attribute_gone_from_moto_is_named_at_start() -> None:
    # Given a patch of an attribute this moto does not have (renamed in an upgrade)
    moved = [(SQSBackend, "receive_message_renamed", lambda: None)]

    # When the patches are checked, Then the check fails, naming the class and the attribute
    with pytest.raises(moto_patches.MotoChangedError, match=r"SQSBackend\.receive_message"):
        moto_patches.check(moved)


def test_another_moto_version_is_refused_before_anything_is_patched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given another moto than the one the patches were written for
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "5.3.0")
    original = SQSBackend.receive_message

    # When the server installs them
    with pytest.raises(moto_patches.MotoChangedError, match=r"moto 5\.3\.0 is installed"):
        moto_patches.install()

    # Then moto is left as it was
    assert SQSBackend.receive_message is original
