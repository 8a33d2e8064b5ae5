"""The moto patch registry (:mod:`s3ingest.local.emulator.moto_patches`): every patched target
exists in the installed moto with the shape its patch expects, a correctness patch refuses a moto
outside its versions, a speed patch is skipped there, the ``local`` extra pins the tested range, and
nothing but the registry applies a patch.
"""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from s3ingest.local.emulator import moto_patches
from s3ingest.local.emulator.moto_patches import PATCHES, TESTED, MotoPatchError, Patch, Target

ROOT = Path(__file__).resolve().parents[2]

#: Names of the fake patches applied, in order (their ``apply`` is :func:`_record_apply`).
APPLIED: list[str] = []


def _record_apply() -> None:
    APPLIED.append("applied")


@pytest.fixture
def applied() -> list[str]:
    APPLIED.clear()
    return APPLIED


def _fake(name: str, kind: moto_patches.Kind, versions: tuple[str, str] = TESTED) -> Patch:
    return Patch(
        name=name,
        kind=kind,
        why="a test's",
        apply=f"{__name__}:_record_apply",
        targets=(Target("moto.s3.models", "S3Backend.list_object_versions"),),
        moto=versions,
    )


def test_every_target_exists_in_the_installed_moto_with_its_shape() -> None:
    # GIVEN a fresh interpreter (no patch applied yet), WHEN every target is checked
    script = (
        "import json; from s3ingest.local.emulator import moto_patches;"
        "print(json.dumps(moto_patches.problems()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    # THEN each exists, with the shape its patch expects, and each apply names a function
    assert json.loads(out) == []
    # and the replacements keep those shapes (a later check in a patched process agrees)
    moto_patches.install()
    assert moto_patches.problems() == []


def test_every_patch_fits_the_installed_moto_and_says_why() -> None:
    version = moto_patches.moto_version()
    names = [patch.name for patch in PATCHES]
    assert len(names) == len(set(names))
    for patch in PATCHES:
        assert patch.admits(version), (patch.name, patch.versions, version)
        assert patch.kind in ("correctness", "speed")
        assert patch.why and patch.targets
    assert {patch.kind for patch in PATCHES} == {"correctness", "speed"}


def test_the_local_extra_pins_moto_to_the_tested_range() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    local = pyproject["project"]["optional-dependencies"]["local"]
    assert f"moto[server]>={TESTED[0]},<{TESTED[1]}" in local
    assert all(patch.moto == TESTED for patch in PATCHES)


def test_a_correctness_patch_refuses_a_moto_outside_its_versions(applied: list[str]) -> None:
    # GIVEN the registry, WHEN installed against a moto it was not written for
    with pytest.raises(MotoPatchError) as refused:
        moto_patches.install(version="5.3.0")
    # THEN it refuses, naming every correctness patch, its versions and the installed one
    message = str(refused.value)
    for patch in PATCHES:
        if patch.kind == "correctness":
            assert f"{patch.name} (written against moto >=5.2.5,<5.3, installed 5.3.0)" in message
        else:
            assert f"{patch.name} " not in message
    # and nothing is applied when one patch refuses, even the ones before it
    patches = [_fake("test-fits", "correctness"), _fake("test-old", "correctness", ("5.0", "5.1"))]
    with pytest.raises(MotoPatchError, match=r"test-old \(written against moto >=5.0,<5.1"):
        moto_patches.install(version="5.2.5", patches=patches)
    assert applied == []
    with pytest.raises(MotoPatchError, match=r"installed 4\.2\.14"):
        moto_patches.install(version="4.2.14", patches=[_fake("test-older", "correctness")])
    assert applied == []


def test_a_correctness_patch_refuses_a_moto_without_its_target(applied: list[str]) -> None:
    patch = Patch(
        name="test-missing-target",
        kind="correctness",
        why="a test's",
        apply=f"{__name__}:_record_apply",
        targets=(
            Target("moto.s3.models", "S3Backend.no_such_method"),
            Target("moto.s3.models", "S3Backend.list_object_versions", params=("self", "x")),
        ),
    )
    with pytest.raises(MotoPatchError) as refused:
        moto_patches.install(patches=[patch])
    assert "moto.s3.models:S3Backend.no_such_method: missing" in str(refused.value)
    assert "moto.s3.models:S3Backend.list_object_versions: takes (" in str(refused.value)
    assert applied == []


def test_a_speed_patch_is_skipped_outside_its_versions(
    applied: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a speed patch and a correctness patch that fit 5.2.5, and a speed patch that does not
    patches = [
        _fake("test-speed-old", "speed", ("5.0", "5.1")),
        _fake("test-speed-fits", "speed"),
        _fake("test-correct-fits", "correctness"),
    ]
    # WHEN installed
    with caplog.at_level(logging.WARNING, logger=moto_patches.__name__):
        done = moto_patches.install(version="5.2.5", patches=patches)
    # THEN the old speed patch is skipped with a warning, the others are applied
    assert done == ["test-speed-fits", "test-correct-fits"]
    assert applied == ["applied", "applied"]
    assert "moto speed patch test-speed-old skipped: written against moto >=5.0,<5.1" in caplog.text


def test_install_is_idempotent() -> None:
    from moto.awslambda.models import LambdaBackend
    from moto.s3.models import S3Backend

    moto_patches.install()
    invoke, listing = LambdaBackend.invoke, S3Backend.list_object_versions
    assert moto_patches.install() == [patch.name for patch in PATCHES]
    assert LambdaBackend.invoke is invoke
    assert S3Backend.list_object_versions is listing
    assert invoke.__module__ == "s3ingest.local.emulator.lambda_service"


def test_named_patches() -> None:
    names = ("s3-delete-one-inventory-configuration", "dynamodb-item-atomicity")
    assert [patch.name for patch in moto_patches.named(*names)] == list(reversed(names))
    with pytest.raises(KeyError, match="no-such-patch"):
        moto_patches.named("no-such-patch")


def _calls(path: Path) -> list[str]:
    """``f`` and ``module.f`` of every call in a file."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                found.append(func.id)
            elif isinstance(func, ast.Attribute):
                found.append(func.attr)
                if isinstance(func.value, ast.Name):
                    found.append(f"{func.value.id}.{func.attr}")
    return found


def test_only_the_registry_applies_patches_and_only_the_emulator_installs_them() -> None:
    # a patch function called by its module name (``requests.install``) or its own name
    banned: dict[str, str] = {}
    for patch in PATCHES:
        module, _, function = patch.apply.partition(":")
        name = f"{module.rsplit('.', 1)[-1]}.{function}" if function == "install" else function
        banned[name] = patch.name
    callers: dict[str, list[str]] = {}
    for path in sorted((ROOT / "s3ingest").rglob("*.py")):
        for call in _calls(path):
            if call in banned or call == "moto_patches.install":
                callers.setdefault(call, []).append(str(path.relative_to(ROOT)))
    assert callers == {"moto_patches.install": ["s3ingest/local/emulator/server.py"]}
