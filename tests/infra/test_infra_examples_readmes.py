"""The examples' READMEs (``examples/*/README.md``) run as written: every command of their fenced
``bash`` blocks is one this module knows, and those that need no AWS account are run here.

- ``cd examples/<name>``: the directory exists (the commands after it run there).
- ``python app.py``: run as a subprocess, offline, in a scratch working directory (the
  example's ``app.py`` by its path), on the repository's pinned Node; it writes ``cdk.out/``.
- ``python app.py publish cdk.out <bucket>``: the StackSet assets ``python app.py`` wrote, uploaded
  to a bucket of moto's in-process S3 (``publish_assets``, what that command calls).
- ``npx cdk deploy --app "python3 app.py" [-c key=value] STACK``: needs an AWS account, so not run:
  the pinned CDK CLI exists, every ``-c`` key is one the app reads, and ``STACK`` is a stack of
  the ``cdk.out`` that ``python app.py`` wrote.

Every repository path a README names in backticks or links to exists.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from moto import mock_aws

from s3ingest_cdk.bundling import BUNDLE_CACHE_CONTEXT
from s3ingest_cdk.synth import PROJECT_ROOT

EXAMPLES = PROJECT_ROOT / "examples"
READMES = sorted(EXAMPLES.glob("*/README.md"))
NODE_BIN = PROJECT_ROOT / "node_modules" / ".bin"
_FENCE = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_DEPLOY = re.compile(r'^npx cdk deploy --app "python3 app\.py"((?: -c \S+)*) (\S+)$')


def _commands(readme: Path) -> list[str]:
    """The commands of ``readme``'s fenced bash blocks, one per line (comments dropped)."""
    lines = []
    for block in _FENCE.findall(readme.read_text()):
        for line in block.splitlines():
            command = line.split(" #")[0].strip()
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


def _module(example: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"readme_{example.name}", example / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_readme_has_commands() -> None:
    # GIVEN the examples with a README THEN each gives its commands in a fenced bash block
    assert [r.parent.name for r in READMES] == ["organisation", "regions"]
    for readme in READMES:
        assert _commands(readme), readme


@pytest.mark.parametrize("readme", READMES, ids=lambda r: r.parent.name)
def test_every_command_is_one_this_test_runs_or_checks(readme: Path) -> None:
    known = (
        lambda c: c == f"cd examples/{readme.parent.name}",
        lambda c: c == "python app.py",
        lambda c: re.fullmatch(r"python app\.py publish cdk\.out \S+", c) is not None,
        lambda c: _DEPLOY.match(c) is not None,
    )
    unknown = [c for c in _commands(readme) if not any(k(c) for k in known)]
    assert not unknown, f"{readme}: commands this test neither runs nor checks: {unknown}"
    assert _commands(readme)[0] == f"cd examples/{readme.parent.name}"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Each example's ``python app.py``, run once in a scratch working directory: example name
    -> that directory (its ``cdk.out``). The functions' package is built once for both."""
    cache = tmp_path_factory.mktemp("readme-build")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CDK_")},
        "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "CDK_CONTEXT_JSON": json.dumps({BUNDLE_CACHE_CONTEXT: str(cache)}),
    }
    found: dict[str, Path] = {}
    for readme in READMES:
        if "python app.py" not in _commands(readme):
            continue
        cwd = tmp_path_factory.mktemp(f"readme-{readme.parent.name}")
        done = subprocess.run(
            [sys.executable, str(readme.parent / "app.py")],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        found[readme.parent.name] = cwd
    yield found


@pytest.mark.parametrize("readme", READMES, ids=lambda r: r.parent.name)
def test_python_app_py_writes_the_stacks_the_readme_deploys(
    readme: Path, ran: dict[str, Path]
) -> None:
    # GIVEN `python app.py` run as the README says
    manifest = json.loads((ran[readme.parent.name] / "cdk.out" / "manifest.json").read_text())
    stacks = {
        k for k, v in manifest["artifacts"].items() if v["type"] == "aws:cloudformation:stack"
    }
    context_keys = set(_module(readme.parent).DEFAULTS) | {"stage"}
    deploys = [m for m in map(_DEPLOY.match, _commands(readme)) if m is not None]
    assert deploys
    # THEN each `npx cdk deploy` names a stack it wrote, with context keys the app reads, with
    # the pinned CDK CLI
    assert (NODE_BIN / "cdk").exists()
    for deploy in deploys:
        assert deploy.group(2) in stacks, (deploy.group(0), stacks)
        for option in shlex.split(deploy.group(1))[1::2]:
            assert option.split("=")[0] in context_keys, deploy.group(0)


def test_publish_uploads_what_python_app_py_wrote(
    ran: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the organisation example's `python app.py` (step 3 reads its cdk.out)
    tmp_cwd = ran["organisation"]
    (command,) = [c for c in _commands(EXAMPLES / "organisation" / "README.md") if "publish" in c]
    _, _, _, outdir, bucket = shlex.split(command)
    assert outdir == "cdk.out"
    stackset = tmp_cwd / "cdk.out" / "stackset"
    expected = {
        destination["objectKey"]
        for asset in json.loads((stackset / "Source.assets.json").read_text())["files"].values()
        for destination in asset["destinations"].values()
    }
    assert expected
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.chdir(tmp_cwd)
    module = _module(EXAMPLES / "organisation")
    with mock_aws():
        s3 = boto3.client("s3", region_name="eu-west-1")
        s3.create_bucket(
            Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
        # WHEN `python app.py publish cdk.out <bucket>` runs (what its argv branch calls)
        module.publish_assets(Path("cdk.out"), bucket)
        keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}
    # THEN every asset of the StackSet's template is in the bucket
    assert keys == expected


_PATHS = re.compile(r"`((?:docs|tests|examples|infra|s3ingest|functions)/[\w./-]+)`")
_LINKS = re.compile(r"\]\(([^)#:]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("readme", READMES, ids=lambda r: r.parent.name)
def test_every_path_a_readme_names_exists(readme: Path) -> None:
    text = readme.read_text()
    named = [PROJECT_ROOT / p for p in _PATHS.findall(text)]
    linked = [readme.parent / p for p in _LINKS.findall(text)]
    assert named or linked
    missing = [str(p) for p in named + linked if not p.exists()]
    assert not missing, missing
