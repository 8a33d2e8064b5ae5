"""The layering rules: the core is AWS-free, only the adapters call AWS, and only the ledger
adapter knows the row's storage.

* ``functions/s3ingest_fn/core`` imports nothing from boto3, botocore or the adapters (nor from
  the services, the handlers or the wiring, which may use adapters), read from the sources and
  checked at run time in a fresh interpreter (transitive imports included).
* Only ``adapters/`` and ``wiring.py`` import boto3 or botocore (or their type stubs): the
  services and the handlers work over the ports (``core/ports.py``), and the handlers get their
  clients and adapters from ``wiring.py``. The services and handlers import no adapter either,
  but for the one listed in :data:`ADAPTER_IMPORTS_ALLOWED`.
* The ledger item's attribute names, as the adapter itself lists them, appear as string
  literals nowhere in ``functions/`` and ``s3ingest/`` outside the adapter.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from s3ingest_fn.adapters import dynamo_ledger

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions"
PACKAGE = FUNCTIONS / "s3ingest_fn"
CORE = PACKAGE / "core"
#: The AWS SDK's packages, and the prefixes of its type stubs' (``mypy_boto3_s3``, ...):
#: imported by ``adapters/`` and ``wiring.py`` only.
AWS_SDK = ("boto3", "botocore")
AWS_STUBS = ("mypy_boto3", "types_boto3")
#: Modules outside ``adapters/`` and ``wiring.py`` that may import an adapter, and which one:
#: the change relay decodes the ledger's stream images (the row's storage, which only the
#: ledger adapter knows) and re-exports the stream filter the stack deploys.
ADAPTER_IMPORTS_ALLOWED = {"services/changes.py": {"s3ingest_fn.adapters.dynamo_ledger"}}
#: Module prefixes the core must not import.
FORBIDDEN = (
    "boto3",
    "botocore",
    "mypy_boto3",
    "types_boto3",
    "s3ingest_fn.adapters",
    "s3ingest_fn.services",
    "s3ingest_fn.handlers",
    "s3ingest_fn.wiring",
)


def _imports(path: Path, root: Path = FUNCTIONS) -> list[str]:
    """Every module an ``import``/``from ... import`` names in a file (TYPE_CHECKING blocks
    included), resolved for relative imports against the package root ``root``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.append(module)
            names.extend(f"{module}.{alias.name}" for alias in node.names)
    return names


def _is_sdk(name: str) -> bool:
    """Whether a module name is the AWS SDK's or its type stubs' (``mypy_boto3_sqs.client``)."""
    top = name.split(".", 1)[0]
    return top in AWS_SDK or top.startswith(AWS_STUBS)


def _forbidden(name: str) -> bool:
    return (
        _is_sdk(name)
        or any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
        or name
        in (
            "s3ingest_fn.adapters",
            "s3ingest_fn.services",
            "s3ingest_fn.handlers",
            "s3ingest_fn.wiring",
        )
    )


def test_core_sources_import_no_aws_sdk_and_no_adapter() -> None:
    offenders = {
        str(path.relative_to(ROOT)): bad
        for path in sorted(CORE.rglob("*.py"))
        if (bad := [n for n in _imports(path) if _forbidden(n)])
    }
    assert offenders == {}


def test_the_import_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    # the scanner itself: it must catch every form a forbidden import can take
    probe = tmp_path / "s3ingest_fn" / "core" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from botocore.exceptions import ClientError\n"
        "from ..adapters import dynamo_ledger\n"
        "import boto3.session\n",
        encoding="utf-8",
    )
    found = [n for n in _imports(probe, tmp_path) if _forbidden(n)]
    assert "botocore.exceptions" in found
    assert "s3ingest_fn.adapters" in found
    assert "boto3.session" in found


def _layer_sources() -> list[Path]:
    """Every module of ``core/``, ``services/`` and ``handlers/``, and the package's top-level
    modules but ``wiring.py`` (``contract.py``, ``effects.py``)."""
    paths = [p for d in ("core", "services", "handlers") for p in (PACKAGE / d).rglob("*.py")]
    paths += [p for p in PACKAGE.glob("*.py") if p.name != "wiring.py"]
    return sorted(paths)


def test_only_adapters_and_wiring_import_the_aws_sdk() -> None:
    sources = _layer_sources()
    assert {p.parent.name for p in sources} >= {"core", "services", "handlers", "s3ingest_fn"}
    offenders = {
        str(path.relative_to(PACKAGE)): bad
        for path in sources
        if (bad := sorted({n for n in _imports(path) if _is_sdk(n)}))
    }
    assert offenders == {}


def test_services_and_handlers_reach_adapters_only_through_wiring() -> None:
    found = {
        str(path.relative_to(PACKAGE)): adapters
        for path in _layer_sources()
        if (
            adapters := {
                ".".join(n.split(".")[:3])
                for n in _imports(path)
                if n == "s3ingest_fn.adapters" or n.startswith("s3ingest_fn.adapters.")
            }
        )
    }
    assert found == ADAPTER_IMPORTS_ALLOWED


def test_the_sdk_import_check_sees_every_form(tmp_path: Path) -> None:
    # the same scanner on a service: a lazy import inside a function counts too
    probe = tmp_path / "s3ingest_fn" / "services" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "def handler():\n    import boto3\n    return boto3.client('s3')\n"
        "from botocore import exceptions\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from mypy_boto3_sqs.client import SQSClient\n",
        encoding="utf-8",
    )
    found = {n.split(".")[0] for n in _imports(probe, tmp_path) if _is_sdk(n)}
    assert found == {"boto3", "botocore", "mypy_boto3_sqs"}
    assert not _is_sdk("s3ingest_fn.adapters.sqs") and not _is_sdk("boto3x")


def test_importing_the_core_loads_no_aws_sdk_and_no_adapter() -> None:
    modules = sorted(
        "s3ingest_fn.core." + p.stem for p in CORE.glob("*.py") if p.stem != "__init__"
    )
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=FUNCTIONS,
        env={"PYTHONPATH": str(FUNCTIONS), "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = json.loads(out.stdout)
    assert "s3ingest_fn.core.decide" in loaded  # the check ran
    assert [m for m in loaded if _forbidden(m)] == []


def _string_literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_row_attribute_names_appear_only_in_the_ledger_adapter() -> None:
    adapter = Path(dynamo_ledger.__file__).resolve().parent  # the package's modules
    names = set(dynamo_ledger.ATTRIBUTES) | set(dynamo_ledger.LEGACY_ATTRIBUTES)
    assert {"pk", "h0", "fx"} <= names  # the adapter's own lists, so this cannot go stale
    # ``op`` is kept from the legacy layout because the deployed stream filter names it; the
    # same word is the step field of the local scenario format
    # (s3ingest/local/rehearsal/scenario.py)
    names -= set(dynamo_ledger.SHARED_WORDS)
    sources = [
        p
        for d in (FUNCTIONS, ROOT / "s3ingest", ROOT / "infra", ROOT / "examples")
        for p in sorted(d.rglob("*.py"))
        if adapter not in p.resolve().parents
    ]
    assert len(sources) > 40
    offenders = {
        str(p.relative_to(ROOT)): sorted(found)
        for p in sources
        if (found := _string_literals(p) & names)
    }
    assert offenders == {}
