"""``s3ingest verify``: a canary through the pipeline, each hop timed."""

from __future__ import annotations

from collections.abc import Callable

from s3ingest import verify as checks


def verify_pipeline(
    pipeline: checks.Pipeline,
    *,
    timeout_seconds: float,
    on_hop: Callable[[checks.Hop], None] | None = None,
) -> checks.VerifyReport:
    """Send the canary through ``pipeline`` (a deployed stack's or the local runtime's, from
    :mod:`s3ingest.commands.context`) and time each hop (``on_hop`` gets each one as it ends);
    each hop may take ``timeout_seconds``. The canary's versions are removed at the end."""
    return checks.verify(pipeline, timeout_seconds=timeout_seconds, on_hop=on_hop)
