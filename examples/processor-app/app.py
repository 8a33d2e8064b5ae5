#!/usr/bin/env python3
"""A team's own CDK app with its own ``module`` processor, which imports a third-party package.

The processor's package is in ``processors/`` (the pipeline's ``processor_package_dir``), its
dependencies in ``processors/requirements.txt`` beside it: synth installs them into the
functions' package for the Lambda platform (no Docker), imports the processor from that package
and fails, naming the package, when something it imports is not declared. Everything is built
under ``cdk.out`` (``cdk.out/.s3ingest-build``), nothing in this folder.

Needs s3ingest with its ``cdk`` extra: ``pip install "<checkout>[cdk]"`` (it is not on PyPI);
``npx cdk synth`` from this directory runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import App, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from s3ingest_cdk import ProcessorConfig, S3IngestPipeline

#: The team's processors and their ``requirements.txt``.
PROCESSORS_DIR = Path(__file__).resolve().parent / "processors"


class SlugsStack(Stack):
    """The team's stack: an s3ingest pipeline (its own landing bucket) running the team's
    ``team_slugs.index:process`` for every ``.csv`` change."""

    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.ingest = S3IngestPipeline(
            self,
            "Ingest",
            stage="slugs",
            processors=[
                ProcessorConfig("slugs", module="team_slugs.index:process", suffixes=(".csv",))
            ],
            processor_package_dir=str(PROCESSORS_DIR),
        )


def build(app: App) -> SlugsStack:
    """The team's stack, with cdk-nag's AwsSolutions checks on the whole app."""
    stack = SlugsStack(app, "Slugs")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return stack


def main() -> None:
    """Synthesize the app (``cdk synth`` runs this)."""
    app = App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
