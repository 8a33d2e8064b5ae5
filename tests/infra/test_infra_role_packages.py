"""A role's own packages (``FunctionRole.packages``): the reconcile function's asset holds
pyarrow built and compiled for the Lambda runtime, the other functions' asset does not, and the
other roles' templates are as without it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from s3ingest import function_roles
from s3ingest.packaging import PYTHON_VERSION as RUNTIME_PYTHON
from s3ingest.packaging import BundlingError, cache_tag, locked_requirements, magic_number
from s3ingest_cdk.bundling import ROLE_LEFT_OUT, role_lock_path
from s3ingest_cdk.synth import Synth
from tests.infra.functions import function_asset, shared_asset

#: ``e_machine`` of an ELF file built for ``aarch64`` (EM_AARCH64).
_EM_AARCH64 = 183
_DT_NEEDED = 1


def _elf(path: Path) -> tuple[int, list[str]]:
    """``e_machine`` and the ``DT_NEEDED`` names of a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    assert data[:6] == b"\x7fELF\x02\x01", path
    machine = struct.unpack_from("<H", data, 18)[0]
    shoff, shentsize, shnum = (
        struct.unpack_from("<Q", data, 40)[0],
        *struct.unpack_from("<HH", data, 58),
    )
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    needed: list[str] = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[link][4]
        for at in range(offset, offset + size, entsize):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == _DT_NEEDED:
                end = data.index(b"\0", strtab + value)
                needed.append(data[strtab + value : end].decode())
    return machine, needed


def test_the_reconcile_and_history_roles_name_their_packages_and_no_other_role_one() -> None:
    assert function_roles.RECONCILE.packages == ("pyarrow",)
    assert function_roles.HISTORY.packages == ("pyiceberg",)
    named = sorted(r.name for r in function_roles.ROLES.values() if r.packages)
    assert named == ["history", "reconcile"]


def test_the_history_asset_holds_pyiceberg_pyarrow_and_the_glue_model(fanout_synth: Synth) -> None:
    """The writer's Glue catalog (pyiceberg's, through boto3) needs the Glue service model,
    which the shared asset's trimmed botocore leaves out."""
    asset = function_asset(fanout_synth, "HistoryHistoryWriter")
    assert asset != shared_asset(fanout_synth)
    assert (asset / "s3ingest_fn" / "services" / "history.py").is_file()
    assert (asset / "pyiceberg" / "catalog" / "glue.py").is_file()
    assert (asset / "pyarrow").is_dir()
    assert list((asset / "botocore" / "data" / "glue").rglob("service-2.json*"))
    assert not (shared_asset(fanout_synth) / "pyiceberg").exists()


def test_the_reconcile_asset_holds_pyarrow_for_the_runtime(synth: Synth) -> None:
    asset = function_asset(synth, "ReconcileFunction")
    assert asset != shared_asset(synth)
    assert (asset / "s3ingest_fn" / "services" / "reconcile_columnar.py").is_file()
    # built for the runtime: CPython 3.13 on aarch64 ...
    lib = asset / "pyarrow" / f"lib.cpython-{RUNTIME_PYTHON.replace('.', '')}-aarch64-linux-gnu.so"
    assert _elf(lib)[0] == _EM_AARCH64
    # ... its modules compiled to the runtime's bytecode (unchecked-hash .pyc)
    tag, magic = cache_tag(), magic_number()
    modules = list((asset / "pyarrow").rglob("*.py"))
    assert len(modules) > 20
    for source in modules:
        pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert pyc.read_bytes()[:4] == magic, source
    assert not [p for p in asset.rglob("*.pyc") if f".{tag}." not in p.name]


def test_what_the_reconcile_asset_leaves_out_no_library_of_it_needs(synth: Synth) -> None:
    pyarrow = function_asset(synth, "ReconcileFunction") / "pyarrow"
    assert not (pyarrow / "tests").exists() and not (pyarrow / "include").exists()
    assert not list(pyarrow.glob("*flight*"))
    libraries = {p.name: p for p in pyarrow.glob("*.so*")}
    for name, path in libraries.items():
        machine, needed = _elf(path)
        assert machine == _EM_AARCH64, name
        own = [n for n in needed if n.startswith(("libarrow", "libparquet"))]
        assert set(own) <= libraries.keys(), (name, set(own) - libraries.keys())
    for module in ("lib", "_compute", "_csv", "_json", "_parquet", "_orc", "_dataset"):
        assert f"{module}.cpython-313-aarch64-linux-gnu.so" in libraries, module


def test_the_shared_asset_holds_no_role_package(synth: Synth, fanout_synth: Synth) -> None:
    for one in (synth, fanout_synth):
        assert not (shared_asset(one) / "pyarrow").exists()
        assert (function_asset(one, "ReconcileFunction") / "pyarrow").is_dir()
    # the fan-out's step function is the shared asset's (its diff runs per shard)
    fan_out = function_asset(fanout_synth, "ReconcileFanOutFunction")
    assert fan_out == shared_asset(fanout_synth)


def test_the_other_functions_run_the_shared_asset(synth: Synth) -> None:
    keys = {
        logical_id: resource["Properties"]["Code"].get("S3Key")
        for logical_id, resource in synth.resources("AWS::Lambda::Function").items()
        if "S3Key" in resource["Properties"]["Code"]
    }
    reconcile = [k for k in keys if k.startswith("ReconcileFunction")]
    shared = {v for k, v in keys.items() if k not in reconcile}
    assert len(reconcile) == 1 and len(shared) == 1
    assert keys[reconcile[0]] not in shared


def test_locked_requirements_are_the_names_and_what_they_need(tmp_path: Path) -> None:
    lock = tmp_path / "packages.lock"
    lock.write_text(
        "alpha==1.0 \\\n    --hash=sha256:aa\n    # via -r packages.txt\n"
        "beta==2.0 \\\n    --hash=sha256:bb\n    # via\n    #   alpha\n    #   gamma\n"
        "delta==4.0 \\\n    --hash=sha256:dd\n    # via beta\n"
        "gamma==3.0 \\\n    --hash=sha256:cc\n    # via -r packages.txt\n"
    )
    found = locked_requirements(lock, ["Alpha"])
    assert [line.split("==")[0] for line in found.splitlines() if "==" in line] == [
        "alpha",
        "beta",
        "delta",
    ]
    assert "--hash=sha256:dd" in found and "gamma" not in found
    with pytest.raises(BundlingError, match="pins no omega"):
        locked_requirements(lock, ["omega"])


def test_the_roles_packages_are_in_the_lock() -> None:
    lock = role_lock_path()
    for role in function_roles.ROLES.values():
        if role.packages:
            assert "--hash=sha256:" in locked_requirements(lock, role.packages)
    assert "pyarrow/*flight*" in ROLE_LEFT_OUT
