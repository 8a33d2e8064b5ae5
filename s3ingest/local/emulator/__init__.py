"""The emulator: moto's server in this process, the patches that make it answer as AWS does, and
the services written for it (Lambda, Step Functions' executor, Batch Operations, faithful S3
events, inventory reports, delivery chaos and Lambda's limits). It imports nothing of the stack
or the rehearsal tools."""

import importlib
from typing import Any

#: Names of :mod:`.server` that were ``s3ingest.local.emulator.NAME`` before the split (the
#: docs name the two patches), still importable from here.
_SERVER_NAMES = frozenset(
    {
        "Emulator",
        "PortInUseError",
        "check_port",
        "report_event_bridge_configuration",
        "delete_one_inventory_configuration",
    }
)


def __getattr__(name: str) -> Any:
    if name not in _SERVER_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.server"), name)
