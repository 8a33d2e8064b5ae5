"""The function asset as shipped (issue 37): bytecode for the runtime's Python, the service
models the functions call, and the X-Ray SDK only with ``tracing`` on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from s3ingest.packaging import PIP_PLATFORM, PYTHON_VERSION, cache_tag, magic_number
from s3ingest_cdk.bundling import (
    BOTOCORE_SERVICES,
    FUNCTION_PACKAGE,
    FUNCTIONS_DIR,
    LOCK_FILE,
    RUNTIME,
    PipLocalBundling,
)
from s3ingest_cdk.synth import Synth
from tests.infra.functions import shared_asset


def _asset_dir(synth: Synth) -> Path:
    # the shared one (the reconcile function's has pyarrow too: test_infra_role_packages.py)
    return shared_asset(synth)


def _uncompiled(asset: Path) -> list[Path]:
    """The modules of ``asset`` without a ``.pyc`` of the runtime's Python, or with one of
    another magic number or not an unchecked-hash one (PEP 552 flags ``0b01``)."""
    tag, magic = cache_tag(PYTHON_VERSION), magic_number(PYTHON_VERSION)
    missing = []
    for source in asset.rglob("*.py"):
        pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        header = pyc.read_bytes()[:8] if pyc.is_file() else b""
        if header[:4] != magic or int.from_bytes(header[4:8], "little") != 0b01:
            missing.append(source)
    return missing


def test_the_runtime_is_the_python_the_bytecode_is_compiled_for() -> None:
    assert RUNTIME.name == f"python{PYTHON_VERSION}"


def test_every_module_of_the_asset_has_bytecode_for_the_runtime(
    synth: Synth, fanout_synth: Synth
) -> None:
    for asset in (_asset_dir(synth), _asset_dir(fanout_synth)):
        modules = list(asset.rglob("*.py"))
        assert len(modules) > 300
        assert _uncompiled(asset) == []
        # ... and no other Python's (the host's: ignored by the runtime, dead weight)
        stray = [p for p in asset.rglob("*.pyc") if f".{cache_tag(PYTHON_VERSION)}." not in p.name]
        assert stray == []
        assert (asset / FUNCTION_PACKAGE / "__pycache__").is_dir()


def test_without_tracing_the_asset_holds_no_xray_sdk(synth: Synth, fanout_synth: Synth) -> None:
    untraced, traced = _asset_dir(synth), _asset_dir(fanout_synth)
    for name in ("aws_xray_sdk", "wrapt"):
        assert not (untraced / name).exists(), name
        assert (traced / name).is_dir(), name  # tracing on (the fan-out synth)
    assert not list(untraced.glob("aws_xray_sdk-*.dist-info"))
    assert not list(untraced.glob("wrapt-*"))


def test_the_botocore_data_holds_the_models_of_the_clients_the_functions_make(
    synth: Synth, fanout_synth: Synth
) -> None:
    data = _asset_dir(synth) / "botocore" / "data"
    assert {p.name for p in data.iterdir() if p.is_dir()} == BOTOCORE_SERVICES
    for name in ("endpoints.json", "partitions.json", "sdk-default-configuration.json"):
        assert (data / name).is_file(), name
    # a processor's code may make any client: its package keeps every model
    full = _asset_dir(fanout_synth) / "botocore" / "data"
    assert len([p for p in full.iterdir() if p.is_dir()]) > 300


def test_every_client_the_functions_make_is_a_kept_model() -> None:
    sources = "\n".join(p.read_text() for p in (FUNCTIONS_DIR / FUNCTION_PACKAGE).rglob("*.py"))
    called = set(re.findall(r"""client\((?:clients, )?["']([a-z0-9-]+)["']""", sources))
    called |= set(re.findall(r"""partial\(_client, clients, ["']([a-z0-9-]+)["']""", sources))
    assert called >= {"s3", "dynamodb", "sqs"}
    assert called <= BOTOCORE_SERVICES


def test_the_clients_are_made_from_the_trimmed_package_as_lambda_imports_it(
    synth: Synth,
) -> None:
    asset = _asset_dir(synth)
    # -I -S: no site-packages, no working directory: the package and the standard library
    code = (
        f"import sys; sys.path.insert(0, {str(asset)!r})\n"
        "import boto3, botocore\n"
        f"assert botocore.__file__.startswith({str(asset)!r}), botocore.__file__\n"
        "session = boto3.session.Session(aws_access_key_id='a', aws_secret_access_key='b', "
        "region_name='eu-west-1')\n"
        f"for service in {sorted(BOTOCORE_SERVICES)!r}:\n"
        "    client = session.client(service)\n"
        "    assert client.meta.service_model.service_name == service\n"
        "    client._endpoint.host\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", code], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_with_tracing_the_xray_model_and_sdk_are_kept(tmp_path: Path) -> None:
    # the X-Ray SDK's sampler makes an "xray" client: without its model the tracing cold
    # start failed (UnknownServiceError: 'xray'), seen by python -m bench --only bundle
    functions = tmp_path / "functions"
    (functions / "pkg").mkdir(parents=True)
    (functions / "pkg" / "__init__.py").write_text("")
    (functions / LOCK_FILE).write_text("a==1 --hash=sha256:00\n")
    made = {}
    for tracing in (True, False):
        bundler = PipLocalBundling(
            functions_dir=functions,
            package="pkg",
            cache_dir=tmp_path / "cache",
            python_version=PYTHON_VERSION,
            platform=PIP_PLATFORM,
            tracing=tracing,
        )
        deps = tmp_path / "cache" / bundler.cache_key()
        for name in ("xray", "s3", "ec2", "aws_xray_sdk", "wrapt"):
            parent = deps / "botocore" / "data" if name in ("xray", "s3", "ec2") else deps
            (parent / name).mkdir(parents=True, exist_ok=True)
        out = tmp_path / f"out-{tracing}"
        out.mkdir()
        bundler.try_bundle(str(out))
        made[tracing] = {p.name for p in (out / "botocore" / "data").iterdir()} | {
            p.name for p in out.iterdir() if p.name in ("aws_xray_sdk", "wrapt")
        }
    assert made[True] == {"xray", "s3", "aws_xray_sdk", "wrapt"}
    assert made[False] == {"s3"}
