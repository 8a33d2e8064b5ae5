"""The deprecated modules of issue 35 still serve their old names, each with a warning."""

from __future__ import annotations

import importlib

import pytest

from s3ingest.cli import render
from s3ingest.commands import backfill, reprocess


@pytest.mark.parametrize(
    ("module", "name", "new"),
    [
        ("s3ingest.backfill_ops", "latest_execution", backfill.latest_backfill),
        ("s3ingest.reprocess_ops", "start_reprocess", reprocess.start_execution),
        ("s3ingest.operations", "to_json", render.to_json),
    ],
)
def test_an_old_name_is_its_new_home_s_with_a_warning(module: str, name: str, new: object) -> None:
    old = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"^{module}\.{name} moved to s3ingest\."):
        assert getattr(old, name) is new
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        old.nope  # noqa: B018
