"""The landing buckets' settings (``buckets``) and the scope the functions check."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3ingest.settings import (
    BucketSpec,
    InventoryRef,
    Settings,
    SettingsError,
    ingest_event_pattern,
)
from s3ingest_fn.core.scope import BucketScope, Scope

BUCKETS = [
    {"name": "raw-landing", "existing": True, "prefixes": ["in/", "drop zone/"]},
    {"id": "Curated", "versioned": False, "suffixes": [".csv"]},
    {
        "name": "partner-drop",
        "existing": True,
        "prefixes": ["p/"],
        "suffixes": [".json"],
        "inventory": {"id": "their-daily", "bucket": "partner-inventory", "prefix": "inv"},
        "eventBridge": False,
    },
]


def test_buckets_parse_from_a_list_or_a_json_string() -> None:
    from_list = Settings.from_context({"buckets": BUCKETS})
    from_string = Settings.from_context({"buckets": json.dumps(BUCKETS)})
    assert from_list == from_string
    raw, curated, partner = from_list.bucket_specs
    assert raw == BucketSpec(name="raw-landing", existing=True, prefixes=("in/", "drop zone/"))
    assert curated.name is None and curated.id == "Curated" and curated.versioned is False
    assert partner.inventory == InventoryRef("their-daily", "partner-inventory", "inv")
    assert partner.event_bridge is False
    assert partner.report_prefix() == "inv/partner-drop/their-daily/"
    assert raw.report_prefix() == "inventory/raw-landing/s3ingest-daily/"
    assert [s.construct_id(i) for i, s in enumerate(from_list.bucket_specs)] == [
        "Landing",
        "Curated",
        "Landing3",
    ]
    # the context form reads back to the same settings
    assert Settings.from_context(from_list.to_context()) == from_list


def test_single_bucket_settings_are_a_one_item_list() -> None:
    created = Settings.from_context({"versioned": "false", "inventoryEnabled": "false"})
    assert created.bucket_specs == (BucketSpec(versioned=False, inventory=False),)
    assert created.owns_inventory is False
    adopted = Settings.from_context({"bucketName": "team-bucket"})
    assert adopted.bucket_specs == (BucketSpec(name="team-bucket", existing=True),)
    # an adopted bucket now gets the stack's inventory, so the fan-out is allowed
    assert adopted.owns_inventory is True
    Settings.from_context({"bucketName": "team-bucket", "reconcileFanOut": "true"})
    assert created.to_context()["buckets"] is None


@pytest.mark.parametrize(
    ("buckets", "problem"),
    [
        ([{"existing": True}], "buckets[0]: an existing bucket needs its name"),
        ([{"name": "Bad_Name"}], "buckets[0].name: 'Bad_Name' is not a valid S3 bucket name"),
        ([{"name": "a-bucket"}, {"name": "a-bucket"}], "buckets: 'a-bucket' is listed twice"),
        ([{"id": "X"}, {"id": "X"}], "buckets: construct id 'X' is used twice"),
        ([{"prefix": ["a/"]}], "buckets[0].prefix: unknown field"),
        ([{"prefixes": "a/"}], "buckets[0].prefixes: expected a list of non-empty strings"),
        ([{"prefixes": [""]}], "buckets[0].prefixes: expected a list of non-empty strings"),
        ([{"existing": "maybe", "name": "abc"}], "buckets[0].existing: expected true or false"),
        (
            [{"inventory": {"id": "x", "bucket": "dest"}}],
            "buckets[0].inventory: only an existing bucket names an existing inventory",
        ),
        ([{"name": "abc", "existing": True, "inventory": {"id": "x"}}], "(id and bucket required)"),
        ({"name": "abc"}, "buckets: expected a list of bucket objects"),
        ("[{", "buckets: not JSON"),
    ],
)
def test_invalid_buckets_are_reported(buckets: object, problem: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"buckets": buckets})
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_buckets_and_bucket_name_together_are_refused() -> None:
    with pytest.raises(SettingsError, match="bucketName and buckets are both set"):
        Settings.from_context({"bucketName": "abc", "buckets": [{"name": "abc"}]})


def test_fan_out_needs_an_inventory_of_every_bucket() -> None:
    with pytest.raises(SettingsError, match="reconcileFanOut needs an S3 Inventory"):
        Settings.from_context(
            {
                "reconcileFanOut": True,
                "buckets": [{"name": "abc", "existing": True, "inventory": False}, {}],
            }
        )


def test_single_bucket_pattern_is_unchanged() -> None:
    assert ingest_event_pattern("b") == {
        "source": ["aws.s3"],
        "detail-type": ["Object Created", "Object Deleted"],
        "detail": {"bucket": {"name": ["b"]}},
    }
    assert ingest_event_pattern([{"name": "a"}, {"name": "b"}])["detail"] == {
        "bucket": {"name": ["a", "b"]}
    }


def test_filtered_buckets_pattern_matches_encoded_keys() -> None:
    pattern = ingest_event_pattern(
        [
            {"name": "plain"},
            {"name": "pre", "prefixes": ["drop zone/"]},
            {"name": "suf", "suffixes": [".csv"]},
            {"name": "both", "prefixes": ["in/", "é/"], "suffixes": [".json"]},
        ]
    )
    assert pattern["detail"] == {
        "$or": [
            {"bucket": {"name": ["plain"]}},
            {"bucket": {"name": ["pre"]}, "object": {"key": [{"prefix": "drop+zone/"}]}},
            {"bucket": {"name": ["suf"]}, "object": {"key": [{"suffix": ".csv"}]}},
            {
                "bucket": {"name": ["both"]},
                "object": {
                    "key": [{"wildcard": "in/*.json"}, {"wildcard": "%C3%A9/*.json"}],
                },
            },
        ]
    }


def test_scope_reads_scope_or_bucket_name() -> None:
    scope = Scope.from_env({"SCOPE": json.dumps([{"name": "a", "prefixes": ["in/"]}])})
    assert scope == Scope((BucketScope("a", ("in/",)),))
    assert scope.contains("a", "in/x") and not scope.contains("a", "out/x")
    assert not scope.contains("b", "in/x")
    assert scope.reason("b", "in/x") == "other-bucket"
    assert scope.reason("a", "out/x") == "key-filter"
    assert scope.reason("a", "in/x") is None
    assert Scope.from_env({"BUCKET_NAME": "a"}).contains("a", "anything")
    assert Scope.from_env({}).contains("any", "thing")
    assert Scope.from_env({"SCOPE": scope.to_json()}) == scope
    with pytest.raises(ValueError, match="SCOPE is not JSON"):
        Scope.from_env({"SCOPE": "{"})
    with pytest.raises(ValueError, match="without a bucket name"):
        Scope.of([{"prefixes": []}])


def test_prefix_and_suffix_may_not_overlap() -> None:
    # as EventBridge's wildcard "ab*b": the key must be at least prefix + suffix long
    assert not BucketScope("a", ("ab",), ("b",)).contains("ab")
    assert BucketScope("a", ("ab",), ("b",)).contains("abb")


_text = st.text(alphabet=st.sampled_from("ab/.é +"), max_size=6)


@given(
    prefixes=st.lists(_text.filter(bool), max_size=2, unique=True),
    suffixes=st.lists(_text.filter(bool), max_size=2, unique=True),
    key=_text,
)
def test_settings_and_functions_agree_on_scope(
    prefixes: list[str], suffixes: list[str], key: str
) -> None:
    spec = BucketSpec(name="abc", prefixes=tuple(prefixes), suffixes=tuple(suffixes))
    scope = Scope.of([spec.scope_entry()])
    assert spec.contains(key) == scope.contains("abc", key)
