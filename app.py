#!/usr/bin/env python3
"""CDK app entry point (``cdk.json`` runs it): composes the s3ingest stack; no logic here."""

from __future__ import annotations

import sys

from aws_cdk import App

from s3ingest.settings import SettingsError
from s3ingest_cdk.compose import compose


def main() -> None:
    """Synthesize the app; invalid settings end the run with one error listing every problem."""
    app = App()
    try:
        compose(app)
    except SettingsError as err:
        sys.exit(f"s3ingest: {err}")
    app.synth()


if __name__ == "__main__":
    main()
