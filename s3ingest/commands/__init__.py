"""The CLI's commands as plain functions: each takes its clients and adapters (from
:mod:`s3ingest.commands.context`, or built over moto or stand-ins in a test) and returns plain
data (dicts, dataclasses) that :mod:`s3ingest.cli` renders as a table or as JSON.

One module per command group: :mod:`.status`, :mod:`.explain`, :mod:`.redrive`, :mod:`.replay`,
:mod:`.reconcile`, :mod:`.repair`, :mod:`.backfill`, :mod:`.verify`, :mod:`.local` (the
emulator's demo and scenario files). None of them prints, reads the environment or chooses an
exit code.
"""
