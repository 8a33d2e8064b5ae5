"""The check that a test run leaves the repository's local stack run directory alone
(``.s3ingest/`` of the checkout: the user's run file, logs and processor dependencies, and the
stack it names): what it holds, by path, before and after the session (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

#: The checkout's root, and its run directory (``s3ingest.local.stack.daemon.RUN_DIR`` there).
REPO = Path(__file__).resolve().parents[1]
REPO_RUN_DIR = REPO / ".s3ingest"

Snapshot = dict[str, tuple[int, int]] | None


def snapshot(directory: Path) -> Snapshot:
    """Each file under ``directory`` (relative path -> ``(mtime_ns, size)``); None when
    ``directory`` does not exist."""
    if not directory.is_dir():
        return None
    found: dict[str, tuple[int, int]] = {}
    for path in directory.rglob("*"):
        try:
            stat = path.stat()
        except OSError:  # gone meanwhile
            continue
        if path.is_file():
            found[str(path.relative_to(directory))] = (stat.st_mtime_ns, stat.st_size)
    return found


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs between two snapshots of one directory, one line each (sorted)."""
    if before is None and after is None:
        return []
    if before is None:
        return ["created"] + [f"created {name}" for name in sorted(after or {})]
    if after is None:
        return ["removed"]
    lines = [f"created {n}" for n in sorted(set(after) - set(before))]
    lines += [f"removed {n}" for n in sorted(set(before) - set(after))]
    lines += [f"modified {n}" for n in sorted(set(before) & set(after)) if before[n] != after[n]]
    return lines
