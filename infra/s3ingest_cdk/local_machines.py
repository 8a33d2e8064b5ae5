"""Writes the stack's state machine definitions as package data (``make machines``).

``python -m s3ingest_cdk.local_machines --write`` synthesizes the app in-process (jsii and Node,
about 15 s; the ``cdk`` extra) in the variants :data:`VARIANTS` names and writes, per state machine
of :data:`MACHINES`, ``<name>.json``: its definition and the functions it invokes, every
CloudFormation token turned into a named placeholder (:func:`detokenize`). The local runtime fills
the placeholders with the emulator's names and ARNs (:mod:`s3ingest.local.machines`), so it runs the
machines the stack deploys without Node; ``tests/infra/test_infra_local_machines.py`` checks the
committed files against the session's synth. ``--check`` exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from s3ingest.local import machines

if TYPE_CHECKING:
    from s3ingest_cdk.synth import Synth

#: Where the files go: the local runtime's package data (:mod:`s3ingest.local.machines`).
HERE = Path(machines.__file__).parent

#: The synthesized variants, as context overrides of ``cdk.json`` (the infra tests' session
#: synths use the same): ``default`` has the Batch Operations backfill, ``fanout`` every optional
#: part, the Distributed Map backfill and the fan-out reconciliation among them.
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "fanout": {
        "reconcileFanOut": True,
        "backfillEngine": "distributed-map",
        "stage": "fanout",
        "alarmEmail": "oncall@example.com",
        "processor": "s3ingest_examples.sidecar:process",
        "changeStream": True,
        "historyTable": True,
        "tracing": True,
    },
}

#: File name -> (variant, the state machine's construct path under the stack).
MACHINES: dict[str, tuple[str, str]] = {
    "backfill-batch-operations": ("default", "Pipeline/Backfill/BackfillStateMachine/StateMachine"),
    "backfill-distributed-map": ("fanout", "Pipeline/Backfill/BackfillStateMachine/StateMachine"),
    "reconcile-fanout": ("fanout", "Pipeline/Reconciliation/ReconcileStateMachine/StateMachine"),
    "backfill-listing": ("default", "Pipeline/Listing/ListingStateMachine/StateMachine"),
    "reprocess": ("default", "Pipeline/Reprocess/ReprocessStateMachine/StateMachine"),
}


def _paths(synth: Synth) -> dict[str, str]:
    """Logical id -> construct path under the stack, without a trailing ``/Resource``
    (``Pipeline/Backfill/StateMachine``), for every resource of the stack."""
    from aws_cdk import CfnElement

    stack = synth.stack
    out = {}
    for construct in stack.node.find_all():
        if isinstance(construct, CfnElement) and construct.stack is stack:
            path = construct.node.path.split("/", 1)[1].removesuffix("/Resource")
            out[str(stack.resolve(construct.logical_id))] = path
    return out


def detokenize(value: Any, paths: dict[str, str]) -> str:
    """A CloudFormation string value as text with ``${...}`` placeholders: ``Ref`` of a
    pseudo-parameter -> ``${AWS::Region}``; ``Ref`` of a resource -> ``${<path>}``;
    ``Fn::GetAtt`` -> ``${<path>.<attribute>}``; ``Fn::Join`` -> its parts joined.

    Raises
    ------
    ValueError
        For any other intrinsic function.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((name, arg),) = value.items()
        if name == "Ref":
            return "${" + (arg if arg.startswith("AWS::") else paths[arg]) + "}"
        if name == "Fn::GetAtt":
            return "${" + paths[arg[0]] + "." + arg[1] + "}"
        if name == "Fn::Join":
            sep, parts = arg
            return str(sep).join(detokenize(p, paths) for p in parts)
    raise ValueError(f"unsupported CloudFormation value: {value!r}")


def machine_document(synth: Synth, machine_path: str) -> dict[str, Any]:
    """``{"definition": <ASL>, "functions": {<path>: {"handler", "environment",
    "timeoutSeconds", "memoryMb"}}}`` for the state machine at
    ``machine_path``: the functions are those whose ARN the definition names."""
    template = synth.template
    paths = _paths(synth)
    by_path = {path: lid for lid, path in paths.items()}
    resource = template["Resources"][by_path[machine_path]]
    text = detokenize(resource["Properties"]["DefinitionString"], paths)
    functions = {}
    for path, logical_id in sorted(by_path.items()):
        fn = template["Resources"].get(logical_id, {})
        if fn.get("Type") != "AWS::Lambda::Function" or "${" + path + ".Arn}" not in text:
            continue
        props = fn["Properties"]
        variables = props.get("Environment", {}).get("Variables", {})
        functions[path] = {
            "handler": props["Handler"],
            "environment": {k: detokenize(v, paths) for k, v in sorted(variables.items())},
            "timeoutSeconds": props.get("Timeout", 3),
            "memoryMb": props.get("MemorySize", 128),
        }
    return {"definition": json.loads(text), "functions": functions}


def documents(synths: dict[str, Synth]) -> dict[str, dict[str, Any]]:
    """File name -> document, for every machine of :data:`MACHINES` (``synths`` by variant)."""
    return {
        name: machine_document(synths[variant], path) for name, (variant, path) in MACHINES.items()
    }


def render(document: dict[str, Any]) -> str:
    """The file's text (sorted keys, two-space indent, final newline)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Synthesize and write (``--write``) or compare (``--check``) the machine files."""
    parser = argparse.ArgumentParser(prog="python -m s3ingest_cdk.local_machines")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write the files")
    mode.add_argument("--check", action="store_true", help="exit 1 when a file differs")
    args = parser.parse_args(argv)
    from s3ingest_cdk.synth import synthesize

    with tempfile.TemporaryDirectory() as tmp:
        synths = {
            variant: synthesize(Path(tmp) / variant, overrides)
            for variant, overrides in VARIANTS.items()
        }
        stale = []
        for name, document in documents(synths).items():
            target = HERE / f"{name}.json"
            text = render(document)
            if args.write:
                target.write_text(text, encoding="utf-8")
                print(f"wrote {target.name}")
            elif not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(target.name)
    if stale:
        print("stale: " + ", ".join(stale) + " (run make machines)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
