"""The settings reference ``docs/settings.md`` is generated from the settings model
(``s3ingest.settings.reference``): the committed page is the generator's output, every setting
and every ``buckets``/``processors`` entry field has a description, and the generator refuses
one without."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from s3ingest.settings import BUCKET_FIELDS, DEFAULTS, Settings, reference
from s3ingest.settings.context import camel
from s3ingest.settings.processors import PROCESSOR_FIELDS

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_page_is_the_generators_output() -> None:
    committed = (ROOT / reference.PAGE).read_text(encoding="utf-8")
    assert committed == reference.render(), "docs/settings.md is not current: make settings-doc"


def test_every_setting_and_entry_field_has_a_description() -> None:
    # Every Settings field is a context key of DEFAULTS, and every key has its row.
    keys = {camel(f.name) for f in dataclasses.fields(Settings)}
    assert keys == set(DEFAULTS)
    assert set(reference.DESCRIPTIONS) == set(DEFAULTS)
    assert set(reference.BUCKET_DESCRIPTIONS) == set(BUCKET_FIELDS)
    assert set(reference.PROCESSOR_DESCRIPTIONS) == set(PROCESSOR_FIELDS)
    page = reference.render()
    for key, value in DEFAULTS.items():
        assert f"| `{key}` | `{reference.default_text(value)}` | " in page
    for field in (*BUCKET_FIELDS, *PROCESSOR_FIELDS):
        assert f"| `{field}` | " in page


def test_a_setting_without_a_description_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DEFAULTS, "newSetting", 3)
    with pytest.raises(reference.MissingDescriptionError) as raised:
        reference.render()
    assert raised.value.names == ["newSetting"]
    descriptions = {k: v for k, v in reference.BUCKET_DESCRIPTIONS.items() if k != "region"}
    monkeypatch.setattr(reference, "BUCKET_DESCRIPTIONS", descriptions)
    monkeypatch.setitem(reference.DESCRIPTIONS, "newSetting", "a new one")
    with pytest.raises(reference.MissingDescriptionError, match="region"):
        reference.render()


def test_a_description_of_no_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(reference.PROCESSOR_DESCRIPTIONS, "colour", "not a field")
    with pytest.raises(reference.MissingDescriptionError, match="colour"):
        reference.render()


def test_the_tombstone_lifetime_is_derived_from_the_defaults() -> None:
    days = Settings().tombstone_ttl_seconds // 86_400
    assert days == sum(
        DEFAULTS[k]
        for k in (
            "archiveRetentionDays",
            "queueRetentionDays",
            "dlqRetentionDays",
            "tombstoneMarginDays",
        )
    )
    assert f"= {days} days." in reference.render()


def test_check_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "docs").mkdir()
    assert reference.main(["--check", "--root", str(tmp_path)]) == 1
    assert "not current" in capsys.readouterr().err
    assert reference.main(["--write", "--root", str(tmp_path)]) == 0
    assert reference.main(["--check", "--root", str(tmp_path)]) == 0
    assert (tmp_path / reference.PAGE).read_text(encoding="utf-8") == reference.render()
