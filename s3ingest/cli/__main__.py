"""``python -m s3ingest.cli``: the ``s3ingest`` command."""

from s3ingest.cli import main

main()
