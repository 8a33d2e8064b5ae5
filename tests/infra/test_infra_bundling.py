"""The function asset: the package plus arm64 / CPython 3.13 wheels, built without Docker."""

from __future__ import annotations

from pathlib import Path

from infra.bundling import BUILD_DIR, FUNCTIONS_DIR, PIP_PLATFORM, PYTHON_VERSION, PipLocalBundling
from infra.synth import Synth


def _asset_dir(synth: Synth) -> Path:
    (asset,) = [p for p in synth.outdir.glob("asset.*") if p.is_dir()]
    return asset


def test_asset_holds_the_function_package_and_its_dependencies(synth: Synth) -> None:
    asset = _asset_dir(synth)
    assert (asset / "s3ingest_fn" / "__init__.py").is_file()
    assert (asset / "aws_lambda_powertools").is_dir()
    assert not list(asset.rglob("__pycache__"))
    assert not (asset / "bin").exists()


def test_native_wheels_target_linux_arm64(synth: Synth) -> None:
    extensions = list(_asset_dir(synth).rglob("*.so"))
    assert extensions, "expected at least one compiled extension (wrapt)"
    for extension in extensions:
        assert "x86_64" not in extension.name, extension
        assert "aarch64" in extension.name or "abi3" in extension.name, extension


def test_dependency_cache_key_follows_the_requirements(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("a==1\n")
    bundler = PipLocalBundling(
        functions_dir=tmp_path,
        package="pkg",
        cache_dir=BUILD_DIR,
        python_version=PYTHON_VERSION,
        platform=PIP_PLATFORM,
    )
    first = bundler.cache_key()
    (tmp_path / "requirements.txt").write_text("a==2\n")
    assert bundler.cache_key() != first
    assert first.startswith(f"deps-{PIP_PLATFORM}-cp{PYTHON_VERSION}-")
    assert (FUNCTIONS_DIR / "requirements.txt").is_file()
