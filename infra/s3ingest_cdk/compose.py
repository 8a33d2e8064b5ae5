"""Composition of the CDK app: settings from context, the one stack, cdk-nag on every synth."""

from __future__ import annotations

import os

from aws_cdk import App, Environment, Validations
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks

from s3ingest.settings import Settings
from s3ingest_cdk.stack import S3IngestStack

#: Region used when neither the CLI nor the environment names one (synth needs no credentials).
FALLBACK_REGION = "us-east-1"


def settings_from_app(app: App) -> Settings:
    """Validated settings from the app's context (``cdk.json`` and ``cdk -c key=value``).

    Raises
    ------
    s3ingest.settings.SettingsError
        Listing every invalid value and every unknown key (the CDK's own keys excepted).
    """
    context = {key: value for key, value in app.node.get_all_context().items() if value is not None}
    return Settings.from_context(context)


def default_environment() -> Environment:
    """The CLI's account and region when it has them; otherwise no account and us-east-1.

    No lookup needs credentials: the stack is account-agnostic (``Aws.ACCOUNT_ID`` tokens).
    """
    return Environment(
        account=os.environ.get("CDK_DEFAULT_ACCOUNT") or None,
        region=os.environ.get("CDK_DEFAULT_REGION") or FALLBACK_REGION,
    )


def compose(
    app: App,
    *,
    env: Environment | None = None,
    nag: bool = True,
    code: lambda_.Code | None = None,
) -> S3IngestStack:
    """Add the s3ingest stack (and, with ``nag``, the cdk-nag AwsSolutions checks) to ``app``.

    Parameters
    ----------
    nag : bool
        Register cdk-nag's AwsSolutions pack as a policy-validation plugin, so synth fails on any
        unacknowledged finding (cdk-nag 3.x, ``Validations.of(app).add_plugins``).

    Raises
    ------
    s3ingest.settings.SettingsError
        When the context settings are invalid.
    """
    settings = settings_from_app(app)
    stack = S3IngestStack(
        app,
        settings.stack_name,
        settings=settings,
        code=code,
        env=env if env is not None else default_environment(),
    )
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return stack
