"""The function-role table (``s3ingest/function_roles.py``) and the one construct built from a
row: the synthesized functions are the rows'."""

from __future__ import annotations

import importlib

import pytest

from s3ingest import function_roles
from s3ingest_cdk.synth import Synth


@pytest.mark.parametrize("row", list(function_roles.ROLES.values()), ids=list(function_roles.ROLES))
def test_every_row_names_a_handler_of_the_bundle(row: function_roles.FunctionRole) -> None:
    if row is function_roles.PROCESSOR:  # the entry's own handler
        return
    module, _, attribute = row.handler.rpartition(".")
    assert callable(getattr(importlib.import_module(module), attribute))


def test_the_default_synth_deploys_the_rows_handlers_and_service_names(synth: Synth) -> None:
    functions = synth.resources("AWS::Lambda::Function")
    deployed = {
        (
            f["Properties"]["Handler"],
            f["Properties"]["Environment"]["Variables"].get("POWERTOOLS_SERVICE_NAME"),
        )
        for f in functions.values()
    }
    for row in function_roles.ROLES.values():
        if row.name in {"reconcile-fanout", "change-relay", "history", "processor"}:
            continue  # not in the default variant
        assert (row.handler, row.service) in deployed, row.name
