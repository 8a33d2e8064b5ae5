"""``python -m s3ingest.local.machines --write``: see :mod:`s3ingest.local.machines.generate`."""

from s3ingest.local.machines.generate import main

raise SystemExit(main())
