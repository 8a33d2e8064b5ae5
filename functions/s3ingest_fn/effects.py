"""The processor API for a team's effect code (documented in docs/processors.md, imported by
processors deployed with earlier versions): :class:`AppliedChange`, :class:`PinnedContent`,
:class:`SupersededError` and :class:`Processor`, defined in :mod:`s3ingest_fn.core.effects`.
"""

from s3ingest_fn.core.effects import AppliedChange, PinnedContent, Processor, SupersededError

__all__ = ["AppliedChange", "PinnedContent", "Processor", "SupersededError"]
