"""The distribution as the package index gets it: the sdist and the wheel built from it (as
``python -m build`` does, with the locked setuptools and no build isolation: no network), their
metadata, and a team's code type-checked against the installed wheel."""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from email.message import Message
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Every top-level package the wheel ships (docs/architecture.md, "What the wheel ships").
PACKAGES = {"s3ingest", "s3ingest_cdk", "s3ingest_fn", "s3ingest_processor", "s3ingest_examples"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: What the copy of the tree the distributions are built from leaves out (nothing the sdist holds).
NOT_SOURCES = (
    ".git",
    ".venv",
    "node_modules",
    "cdk.out",
    ".build",
    "site",
    ".s3ingest",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
)
#: A team's processor module (docs/processors.md) with one planted type error.
PROCESSOR = """\
from s3ingest_processor import Change, Content, processor


def thumbnail(change: Change, content: Content | None) -> None:
    if content is None:
        return
    size: str = len(content.read())
    print(change.key, size)


handler = processor(thumbnail)
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the sdist and the wheel built from that sdist."""
    out = tmp_path_factory.mktemp("dist")
    # from a copy: setuptools writes the egg-info and stages the sdist in the tree it builds, so
    # two builds of one tree (the suite's two workers) remove each other's files
    tree = tmp_path_factory.mktemp("tree") / "s3ingest"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("*.whl")
    return wheel


def _metadata(dist: Path) -> Message:
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(wheel.read(name))


def test_every_top_level_package_ships_its_py_typed_marker(dist: Path) -> None:
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        names = set(wheel.namelist())
    top = {name.split("/")[0] for name in names if name.count("/") == 1}
    assert {t for t in top if not t.endswith(".dist-info")} == PACKAGES
    assert {f"{package}/py.typed" for package in PACKAGES} <= names


def test_the_long_description_links_nothing_relative(dist: Path) -> None:
    description = _metadata(dist).get_payload()
    assert isinstance(description, str)
    targets = LINK.findall(description)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(targets) == len(LINK.findall(readme)) > 40
    assert [t for t in targets if not t.startswith(("https://", "http://", "#"))] == []
    assert "](https://github.com/s3ingest/s3ingest/blob/main/docs/overview.md)" in description
    assert "```bash" in description  # the rest is the README's


def test_the_metadata_names_the_licence_the_repository_and_the_classifiers(dist: Path) -> None:
    metadata = _metadata(dist)
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL") or [])
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    repo_url = re.search(r"^repo_url: (\S+)$", mkdocs, re.M)
    assert repo_url and urls["Source"] == urls["Homepage"] == repo_url.group(1)
    assert set(urls) == {"Homepage", "Source", "Documentation", "Changelog", "Issues"}
    assert all(url.startswith(repo_url.group(1)) for url in urls.values())
    assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])
    assert metadata["Description-Content-Type"] == "text/markdown"


def test_the_distributions_version_is_the_projects(dist: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert _metadata(dist)["Version"] == project["version"]
    assert {p.name for p in dist.iterdir()} == {
        f"s3ingest-{project['version']}.tar.gz",
        f"s3ingest-{project['version']}-py3-none-any.whl",
    }


def test_mypy_checks_a_processor_against_the_installed_wheel(dist: Path, tmp_path: Path) -> None:
    # The wheel installed (no dependencies) into a venv of its own; its packages are found as
    # installed packages (PEP 561), which mypy analyses only with py.typed. The dev venv's
    # site-packages come after it (a .pth) for the dependencies; mypy skips the editable
    # install's import hook there, so s3ingest_processor is the wheel's.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    subprocess.run([*pip, "--no-deps", "--no-index", str(_wheel(dist))], check=True)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "dev.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    (tmp_path / "team_thumbs.py").write_text(PROCESSOR, encoding="utf-8")
    (tmp_path / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")  # not the project's
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--python-executable",
            str(python),
            "--no-incremental",
            "--config-file",
            "mypy.ini",
            "team_thumbs.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "import-untyped" not in checked.stdout
    assert checked.stdout.splitlines()[0] == (
        'team_thumbs.py:7: error: Incompatible types in assignment (expression has type "int", '
        'variable has type "str")  [assignment]'
    )
