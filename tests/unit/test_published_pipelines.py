"""``s3ingest --stack NAME [--pipeline STAGE]`` on a team's stack: the outputs each
``S3IngestPipeline`` publishes with its stage's prefix (``s3ingest_cdk.discovery``) give one
pipeline's outputs under their plain names (:meth:`s3ingest.deployed.DeployedStack.pipeline`)."""

from __future__ import annotations

import pytest

from s3ingest.deployed import DeployedStack, StackNotFoundError
from s3ingest.outputs import LEDGER_TABLE_NAME, PIPELINE_STAGE, QUEUE_URL, published_prefix


def _published(stage: str, table: str) -> dict[str, str]:
    prefix = published_prefix(stage)
    return {
        prefix + PIPELINE_STAGE: stage,
        prefix + LEDGER_TABLE_NAME: table,
        prefix + QUEUE_URL: f"https://sqs/{table}",
    }


def test_the_prefix_is_the_stage_in_camel_case() -> None:
    assert published_prefix("uploads") == "S3IngestUploads"
    assert published_prefix("eu-west-1") == "S3IngestEuWest1"


def test_a_stack_of_one_published_pipeline_needs_no_pipeline_option() -> None:
    stack = DeployedStack("Uploads", {**_published("uploads", "t1"), "TeamBucket": "b"})
    picked = stack.pipeline()
    assert picked.name == "Uploads"
    assert picked.outputs == {LEDGER_TABLE_NAME: "t1", QUEUE_URL: "https://sqs/t1"}
    assert stack.pipeline("uploads") == picked


def test_several_pipelines_are_told_apart_by_stage_even_when_one_prefix_starts_another() -> None:
    stack = DeployedStack("Team", {**_published("up", "short"), **_published("up-load", "long")})
    assert stack.published() == {"up": "S3IngestUp", "up-load": "S3IngestUpLoad"}
    assert stack.pipeline("up").outputs[LEDGER_TABLE_NAME] == "short"
    assert stack.pipeline("up-load").outputs[LEDGER_TABLE_NAME] == "long"
    assert set(stack.pipeline("up").outputs) == {LEDGER_TABLE_NAME, QUEUE_URL}
    with pytest.raises(StackNotFoundError, match=r"name one with --pipeline STAGE.*up, up-load"):
        stack.pipeline()
    with pytest.raises(StackNotFoundError, match=r"no pipeline 'down'.*up, up-load"):
        stack.pipeline("down")


def test_the_s3ingest_stack_s_own_outputs_are_its_pipeline() -> None:
    own = DeployedStack("S3Ingest-dev", {LEDGER_TABLE_NAME: "t", QUEUE_URL: "q"})
    assert own.pipeline() is own
    with pytest.raises(StackNotFoundError, match=r"no pipeline 'dev'.*none"):
        own.pipeline("dev")


def test_names_are_every_output_name_the_module_declares() -> None:
    from s3ingest import outputs

    declared = {
        value
        for key, value in vars(outputs).items()
        if key.isupper() and isinstance(value, str) and key != "PIPELINE_STAGE"
    }
    assert outputs.names() == declared
