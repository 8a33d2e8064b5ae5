"""The CLI's commands as plain functions: each takes its clients and adapters (from
:mod:`s3ingest.commands.context`, or built over moto or stand-ins in a test) and returns plain
data (dicts, dataclasses) that :mod:`s3ingest.cli` renders as a table or as JSON.

One module per command group, the command's one home: :mod:`.status`, :mod:`.explain`,
:mod:`.redrive`, :mod:`.replay`, :mod:`.reconcile`, :mod:`.repair`, :mod:`.backfill`,
:mod:`.review`, :mod:`.reprocess`, :mod:`.verify`. None of them prints, reads the environment,
chooses an exit code or imports the local runtime: the same function runs for ``--local`` and
``--stack``, with the clients the CLI passes in.
"""
