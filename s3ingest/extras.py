"""The optional parts of the s3ingest distribution (``pyproject.toml`` extras) and a check that
one is installed, for the commands that need it.

``pip install s3ingest`` gives the operator CLI for deployed stacks; ``s3ingest[local]`` adds the
local runtime (moto's server, the Lambda handlers' Powertools); ``s3ingest[arrow]`` reads ORC and
Parquet inventories; ``s3ingest[history]`` the history table (pyiceberg, duckdb: ``s3ingest
history --local``, a local deployment with ``historyTable``); ``s3ingest[cdk]`` the CDK app.
Those modules are imported only by the commands that use them, so the base CLI starts without
them.
"""

from __future__ import annotations

import importlib.util

#: Extra name -> the top-level modules it brings (checked without importing them).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "local": ("moto", "aws_lambda_powertools"),
    "history": ("pyiceberg", "pyarrow", "duckdb"),
}


class MissingExtraError(ImportError):
    """An extra a command needs is not installed; the message says what to install."""


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` is importable.

    Parameters
    ----------
    extra : str
        A key of :data:`EXTRA_MODULES`.
    what : str
        What needs it, for the message (``"s3ingest local demo"``).

    Raises
    ------
    MissingExtraError
        Naming the missing modules and the ``pip install`` that brings them.
    """
    missing = [name for name in EXTRA_MODULES[extra] if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"{what} needs the s3ingest[{extra}] extra ({', '.join(missing)} not installed): "
            f"pip install 's3ingest[{extra}]'"
        )
