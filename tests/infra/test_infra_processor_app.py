"""``examples/processor-app``: a team's app outside the pipeline's package, with a ``module``
processor importing a third-party package declared beside it (``processors/requirements.txt``).

Synthesized once (a copy of the example in a temporary folder, so its source folder can be
compared before and after): the package is in the bundle, the build is under the outdir, the
folder is unchanged. The copy without the declaration fails synth naming the package. And the
import check itself, on small bundles made here (no synth).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aws_cdk import App

from s3ingest.packaging import PROCESSOR_REQUIREMENTS, PYTHON_VERSION, cache_tag, lock_pins
from s3ingest.settings import SettingsError
from s3ingest_cdk.bundle_check import ProcessorImportError, check_imports
from s3ingest_cdk.bundling import BUILD_SUBDIR, lock_path
from s3ingest_cdk.synth import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "examples" / "processor-app"
#: The third-party package the example's processor imports, and its import name.
DECLARED = "python-slugify"
IMPORTED = "slugify"


def _load(app_dir: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, app_dir / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "dont_write_bytecode", True)  # the folder is compared after synth
        spec.loader.exec_module(module)
    return module


def _listing(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def _copy(tmp: Path, name: str) -> Path:
    copy = tmp / name
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("__pycache__", "cdk.out"))
    return copy


def _synth(app_dir: Path, outdir: Path, name: str) -> App:
    context = json.loads((app_dir / "cdk.json").read_text())["context"]
    app = App(context=context, outdir=str(outdir))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "dont_write_bytecode", True)
        _load(app_dir, name).build(app)
        app.synth()
    return app


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The example (a copy), synthesized once; its folder's listing before and after."""
    root = tmp_path_factory.mktemp("processor-app")
    app_dir = _copy(root, "app")
    before = _listing(app_dir)
    outdir = root / "cdk.out"
    _synth(app_dir, outdir, "processor_app")
    yield {"dir": app_dir, "before": before, "after": _listing(app_dir), "outdir": outdir}


def test_the_example_declares_the_package_beside_its_processor() -> None:
    requirements = (EXAMPLE / "processors" / PROCESSOR_REQUIREMENTS[1]).read_text()
    assert any(line.startswith(f"{DECLARED}==") for line in requirements.splitlines())
    source = (EXAMPLE / "processors" / "team_slugs" / "index.py").read_text()
    assert f"from {IMPORTED} import" in source


def test_the_example_synthesizes_with_the_package_in_its_bundle(example: dict[str, Any]) -> None:
    outdir: Path = example["outdir"]
    assets = [p for p in outdir.glob("asset.*") if p.is_dir()]
    # the shared asset (the reconcile function's, with pyarrow too, holds the same team code)
    (asset,) = [a for a in assets if (a / "team_slugs").is_dir() and not (a / "pyarrow").exists()]
    # the processor's package, its declared dependency (and that one's own), the pipeline's
    assert (asset / "team_slugs" / "index.py").is_file()
    assert (asset / IMPORTED / "__init__.py").is_file()
    assert (asset / "text_unidecode").is_dir()
    assert (asset / "s3ingest_fn" / "__init__.py").is_file()
    # compiled files: the runtime's Python's only, the team's processor's too (issue 37)
    tag = cache_tag(PYTHON_VERSION)
    assert not [p for p in asset.rglob("*.pyc") if f".{tag}." not in p.name]
    assert (asset / "team_slugs" / "__pycache__" / f"index.{tag}.pyc").is_file()
    # built and cached under the outdir
    cache = outdir / BUILD_SUBDIR
    assert [p.name for p in cache.iterdir() if p.name.startswith("proc-") and p.is_dir()]


def test_synth_writes_nothing_in_the_app_folder(example: dict[str, Any]) -> None:
    assert example["after"] == example["before"]
    assert not (example["dir"] / ".build").exists()
    assert not (PROJECT_ROOT / ".build").exists() or not any(
        (PROJECT_ROOT / ".build").glob("proc-*")
    )


def test_an_undeclared_package_fails_synth_naming_it(
    example: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN the example without its requirements line
    app_dir = _copy(tmp_path, "app")
    requirements = app_dir / "processors" / PROCESSOR_REQUIREMENTS[1]
    requirements.write_text(
        "".join(
            line
            for line in requirements.read_text().splitlines(keepends=True)
            if not line.startswith(DECLARED)
        )
    )
    # WHEN synthesized (the same outdir: the pipeline's lock is cached there)
    with pytest.raises(ProcessorImportError) as raised:
        _synth(app_dir, example["outdir"], "processor_app_undeclared")
    # THEN a settings error naming the processor, the missing package and where to declare it
    assert isinstance(raised.value, SettingsError)
    (problem,) = raised.value.problems
    assert problem.startswith("processors[0].module: 'team_slugs.index:process'")
    assert f"no module {IMPORTED!r}" in problem
    assert str(requirements) in problem


# --- The import check (small bundles, no synth) --------------------------------------------------


def _bundle(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_check_ignores_the_developers_environment(tmp_path: Path) -> None:
    # pytest is importable here, not in the bundle: the check fails
    assert importlib.util.find_spec("pytest") is not None
    bundle = _bundle(
        tmp_path, {"team/__init__.py": "", "team/fx.py": "import pytest\ndef run(c, x): pass\n"}
    )
    with pytest.raises(ProcessorImportError, match="no module 'pytest'"):
        check_imports(bundle, {"processors[0].module": "team.fx:run"})
    assert not list(bundle.rglob("__pycache__"))


def test_a_present_module_and_a_missing_attribute(tmp_path: Path) -> None:
    bundle = _bundle(
        tmp_path, {"team/__init__.py": "", "team/fx.py": "import json\ndef run(c, x): pass\n"}
    )
    assert check_imports(bundle, {"processor": "team.fx:run"}) == []
    with pytest.raises(ProcessorImportError, match="has no 'nope'"):
        check_imports(bundle, {"processor": "team.fx:nope"})
    # an exception other than ImportError on import is a note (the deployed environment differs)
    (bundle / "team" / "boom.py").write_text('raise KeyError("OUTPUT_BUCKET")\n')
    (note,) = check_imports(bundle, {"processor": "team.boom:run"})
    assert "KeyError" in note and "not checked" in note


def test_a_compiled_wheel_for_lambda_is_noted_not_failed(tmp_path: Path) -> None:
    # GIVEN a package whose extension is built for the Lambda runtime only (not this host)
    bundle = _bundle(
        tmp_path,
        {
            "fast/__init__.py": "from fast._core import go\n",
            "fast/_core.cpython-313-aarch64-linux-gnu.so": "",
            "team/__init__.py": "",
            "team/fx.py": "import fast\ndef run(c, x): pass\n",
        },
    )
    (note,) = check_imports(bundle, {"processors[1].module": "team.fx:run"})
    assert "'fast'" in note and "not checked on this host" in note


def test_the_lock_pins_are_constraints_without_hashes() -> None:
    pins = lock_pins(lock_path())
    assert "boto3==" in " ".join(pins)
    assert all("==" in pin and "hash" not in pin and "[" not in pin for pin in pins)


def test_an_import_that_does_not_end_is_a_settings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3ingest_cdk import bundle_check

    monkeypatch.setattr(bundle_check, "CHECK_TIMEOUT_SECONDS", 1)
    bundle = _bundle(
        tmp_path,
        {
            "team/__init__.py": "",
            "team/slow.py": "import time\ntime.sleep(30)\ndef run(c, x): pass\n",
        },
    )
    with pytest.raises(
        ProcessorImportError, match=r"longer than 1 s: does importing team\.slow:run"
    ):
        check_imports(bundle, {"processors[0].module": "team.slow:run"})
