"""``S3IngestPipeline`` as a library construct: typed keyword props validated as the settings are,
the team's bucket (a token name allowed), path-derived logical ids in a team's stack, and the
legacy ids ``S3IngestStack`` keeps (:func:`s3ingest_cdk.stack.unique_id` is CDK's scheme)."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest
from aws_cdk import App, CfnElement, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from s3ingest.settings import BucketSpec, Settings, SettingsError, unknown_keys
from s3ingest_cdk import LandingBucketSource, S3IngestPipeline
from s3ingest_cdk.stack import unique_id
from s3ingest_cdk.synth import Synth, cdk_json_context

INLINE = lambda_.Code.from_inline("def handler(event, context): pass")
#: The CDK feature flags of cdk.json (a team's `cdk init` writes the same recommended flags).
FLAGS = {key: value for key, value in cdk_json_context().items() if key.startswith("@")}


def _stack() -> Stack:
    return Stack(App(context=FLAGS), "Team")


def test_keyword_props_are_the_settings_less_the_bucket_name() -> None:
    # The props cannot drift from the settings: one keyword per field, same default.
    parameters = inspect.signature(S3IngestPipeline.__init__).parameters
    props = {
        name: p.default
        for name, p in parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    expected = {f.name: f.default for f in fields(Settings) if f.name != "bucket_name"}
    assert {name: props[name] for name in expected} == expected
    assert set(props) - set(expected) == {"bucket", "code", "bundle_cache_dir", "publish_outputs"}


def test_invalid_props_fail_with_every_problem_the_settings_rules_find() -> None:
    invalid = {"stage": "1-bad", "queue_retention_days": 0, "log_retention_days": 31}
    with pytest.raises(SettingsError) as raised:
        S3IngestPipeline(_stack(), "Ingest", code=INLINE, **invalid)  # type: ignore[arg-type]
    assert raised.value.problems == Settings(**invalid).problems()  # type: ignore[arg-type]
    assert len(raised.value.problems) == 3


def test_an_unknown_keyword_gets_the_hint_an_unknown_context_key_gets() -> None:
    # A misspelt keyword is reported as cdk.json's misspelt key is: every one, each with the
    # closest setting (else the known ones); the error is also the TypeError Python raises.
    typos = {"queue_retention_day": 7, "Stage": "x", "zzz": 1}
    with pytest.raises(SettingsError) as raised:
        S3IngestPipeline(_stack(), "Ingest", code=INLINE, **typos)  # type: ignore[arg-type]
    assert isinstance(raised.value, TypeError)
    owner = "S3IngestPipeline got an unexpected keyword argument"
    first, second, third = raised.value.problems
    assert first == f"{owner} 'queue_retention_day'; did you mean queue_retention_days?"
    assert second == f"{owner} 'Stage'; did you mean stage?"
    assert third.startswith(f"{owner} 'zzz' (known: ") and "archive_retention_days" in third
    context_problem = unknown_keys({"queueRetentionDay": 7})[0]
    assert context_problem.endswith("; did you mean queueRetentionDays?")


def test_a_created_bucket_with_a_token_name_is_accepted() -> None:
    stack = _stack()
    bucket = s3.Bucket(stack, "Uploads")
    pipeline = S3IngestPipeline(stack, "Ingest", bucket=bucket, code=INLINE)
    assert pipeline.bucket is bucket
    assert pipeline.landing.owned is False and pipeline.landing.inventory_bucket is None
    # no inventory of its own: no backfill, reconciliation lists the bucket
    assert pipeline.backfilling is None and "backfill" not in pipeline.state_machines


def test_an_imported_bucket_name_is_still_checked() -> None:
    stack = _stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Uploads", "Not_A_Bucket")
    with pytest.raises(SettingsError) as raised:
        S3IngestPipeline(stack, "Ingest", bucket=bucket, code=INLINE)
    assert raised.value.problems == ["bucketName: 'Not_A_Bucket' is not a valid S3 bucket name"]


def test_fan_out_needs_the_pipelines_own_inventory_with_a_team_bucket() -> None:
    stack = _stack()
    bucket = s3.Bucket(stack, "Uploads")
    with pytest.raises(SettingsError, match="reconcileFanOut needs the stack's own S3 Inventory"):
        S3IngestPipeline(stack, "Ingest", bucket=bucket, code=INLINE, reconcile_fan_out=True)


def test_two_pipelines_in_one_stack_get_their_own_path_derived_ids() -> None:
    # GIVEN one team stack with two pipelines (two stages: alarm, dashboard and bus names)
    app = App(context=FLAGS)
    stack = Stack(app, "Team")
    first = S3IngestPipeline(stack, "First", stage="first", code=INLINE, change_stream=True)
    second = S3IngestPipeline(stack, "Second", stage="second", code=INLINE)
    template = app.synth().get_stack_by_name("Team").template
    tables = sorted(
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::DynamoDB::Table"
    )
    # THEN each has its ledger, named by its own path
    assert tables == [stack.resolve(p.table.node.default_child.logical_id) for p in (first, second)]  # type: ignore[union-attr]
    assert tables[0].startswith("FirstLedgerTable") and tables[1].startswith("SecondLedgerTable")
    # ... and every id there is CDK's own scheme, which S3IngestStack computes for its legacy ids
    elements = [c for c in stack.node.find_all() if isinstance(c, CfnElement)]
    assert len(elements) > 100
    for element in elements:
        components = element.node.path.split("/")[1:]
        assert unique_id(components) == stack.resolve(element.logical_id), element.node.path


def test_the_stack_keeps_each_resource_id_it_had_before_the_pipeline(synth: Synth) -> None:
    # The stack's resources sit under Pipeline/<feature>/..., their ids are those of the paths
    # without these two levels (test_infra_logical_ids pins the stateful ones by value).
    table = synth.pipeline.table.node.default_child
    assert table is not None and table.node.path.endswith("/Pipeline/Ledger/Table/Resource")
    assert synth.logical_id(synth.pipeline.table) == "LedgerTable9343E4AA"
    queue = synth.pipeline.queue
    assert "/Pipeline/Ingestion/" in queue.node.path
    assert synth.logical_id(queue) == "IngestQueue95F6DB49"
    # an id CDK derives from another construct's unique id follows it (no replaced mapping)
    mappings = synth.resources("AWS::Lambda::EventSourceMapping")
    assert "IngestFunctionSqsEventSourceS3IngestdevIngestQueueDB0949F6EC120040" in mappings


def test_buckets_prop_sets_up_a_bucket_of_the_app_and_creates_another() -> None:
    # GIVEN a team bucket of the app (token name) as an existing entry with a prefix filter, and
    # a second bucket the pipeline creates
    stack = _stack()
    uploads = s3.Bucket(stack, "Uploads")
    pipeline = S3IngestPipeline(
        stack,
        "Ingest",
        code=INLINE,
        buckets=[
            LandingBucketSource(BucketSpec(prefixes=("in/",)), uploads),
            BucketSpec(id="Archive", versioned=False),
        ],
    )
    template = Template.from_stack(stack).to_json()
    first, second = pipeline.landings.entries
    # THEN the team's bucket is the first (default) one, set up, not created again
    assert pipeline.bucket is uploads and not first.owned and first.spec.existing
    assert first.spec.name == uploads.bucket_name
    (setup,) = [r for r in template["Resources"].values() if r["Type"].startswith("Custom::")]
    assert setup["Properties"]["BucketName"] == stack.resolve(uploads.bucket_name)
    assert setup["Properties"]["Inventory"]["Id"] == "s3ingest-daily"
    # ... the second is created under its own id, with the stack's inventory
    assert second.node.id == "Archive" and second.owned and second.inventory_bucket is not None
    # ... every bucket has an inventory: the inventory backfill is deployed, and the listing one
    # (and the reprocess run, on every stack)
    assert pipeline.backfilling is not None
    assert set(pipeline.state_machines) == {"backfill", "backfill-listing", "reprocess"}
    # ... and the ingest rule applies the filter of the first, none to the second
    (rule,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Events::Rule" and "EventPattern" in r["Properties"]
    ]
    alternatives = rule["Properties"]["EventPattern"]["detail"]["$or"]
    assert alternatives[0] == {"bucket": {"name": [stack.resolve(second.bucket.bucket_name)]}}
    assert alternatives[1]["object"] == {"key": [{"prefix": "in/"}]}


def test_bucket_and_buckets_together_are_refused() -> None:
    stack = _stack()
    with pytest.raises(SettingsError, match="bucket and buckets are both given"):
        S3IngestPipeline(
            stack,
            "Ingest",
            code=INLINE,
            bucket=s3.Bucket(stack, "Uploads"),
            buckets=[BucketSpec()],
        )
