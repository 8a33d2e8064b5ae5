"""Function assertions shared by the infrastructure tests: what every s3ingest function gets."""

from __future__ import annotations

from s3ingest_cdk.synth import Synth


def common_environment(synth: Synth, service: str) -> dict[str, str]:
    """The variables ``python_function`` adds to every function: Powertools' and the stack's."""
    return {
        "POWERTOOLS_SERVICE_NAME": service,
        "POWERTOOLS_METRICS_NAMESPACE": "S3Ingest",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "S3INGEST_STACK": synth.stack.stack_name,
    }
