"""A state saved before the local runtime's split (issue 35 item 6) names its classes under the
old ``s3ingest.local.emulator`` module; loading it finds them where they are now."""

from __future__ import annotations

import io

from s3ingest.local.emulator.server import Emulator
from s3ingest.local.stack import saved_state
from s3ingest.local.stack.provisioning import LandingBucket, Resources


def test_a_state_of_the_old_layout_finds_its_classes() -> None:
    old = b"cs3ingest.local.emulator\nResources\n."  # pickle's GLOBAL opcode: module, name
    assert saved_state._Unpickler(io.BytesIO(old)).load() is Resources
    unpickler = saved_state._Unpickler(io.BytesIO(b""))
    assert unpickler.find_class("s3ingest.local.emulator", "LandingBucket") is LandingBucket
    assert unpickler.find_class("s3ingest.local.emulator", "Emulator") is Emulator
    assert unpickler.find_class("builtins", "dict") is dict
