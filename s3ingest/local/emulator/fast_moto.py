"""Make moto's DynamoDB expression handling cheap, without changing what it answers.

moto parses every expression of every request from scratch: one ledger ``UpdateItem`` (a
~30-action update expression and a condition) costs it about 20 ms of CPU, most of it spent
tokenising and parsing the same strings again (the update expression twice per request) and in
validation passes that are quadratic in the number of actions. The speed patches below (one
function each, idempotent; :mod:`s3ingest.local.emulator.moto_patches` applies them when an emulator
starts, skipping any whose moto version it was not written for; :func:`install` applies them all,
:func:`uninstall` restores moto) patch, per process:

* ``UpdateExpressionParser.make`` (``moto/dynamodb/parsing/expressions.py``): memoised per
  expression string. The tree it returns is only read (``find_clauses``) or deep-copied by the
  ``Validator`` before any pass rewrites it (``moto/dynamodb/parsing/validators.py``), so sharing
  it is safe. A malformed expression raises as before: exceptions are never cached.
* The validator's deep copy of such a memoised tree (``Validator.__init__``) is made from its
  pickle, taken once when it was parsed: the same objects, about three times faster.
* The three update-expression validation passes that only check the tree and hand it back
  unchanged (``ActionCountValidator``, ``OverlappingPathsValidator``,
  ``UpdateHashRangeKeyValidator``): once a pass accepted an expression with the same inputs (the
  expression string, and the attribute names and the table's key attributes where the pass reads
  them), it is not run again for it. A pass that rejects runs every time and raises its error, so
  malformed requests are refused as before.
* ``ConditionExpressionParser._lex_condition_expression`` (``moto/dynamodb/comparisons.py``;
  condition and filter expressions): the tokens of an expression string are memoised and handed
  out as fresh nodes each call (the later steps, which depend on the attribute names and values,
  still run every time).
* ``jsonpath_ng.ext.parse``, which moto's EventBridge calls for every input path of every
  event it delivers to a target (``EventTemplateParser.parse``, ``moto/events/utils.py``), building
  a new parser each time: memoised per path string (a parsed path is only read by ``find``).
* ``Table.all_items`` (``moto/dynamodb/models/table.py``), which every Scan request calls and
  which sorts every item of the table by ``DynamoType`` comparisons (about 1.5 s a page of a
  100,000-item table): for a table with a hash key only, whose hash keys are all strings, the
  items are sorted by the key strings themselves, the same order (``DynamoType.__lt__``
  compares string values as Python strings); any other table sorts as before.
* ``moto.backends.list_of_moto_modules``, which the server calls for every request (it lists and
  stats moto's package directory): computed once.
* ``SQSBackend.get_queue_attributes`` (``moto/sqs/models.py``) computes the queue's attributes once
  per call instead of once per requested name and twice more per match, and ``Queue.attributes``
  (which ``SendMessage`` reads too) counts visible, in-flight and delayed messages in one walk
  over the queue instead of three; ``Queue.pending_message_groups`` walks a copy of the
  in-flight set (moto's walk raced a DeleteMessage on another server thread).

The results and errors of every request are those of unpatched moto
(``tests/unit/test_fast_moto.py`` replays the same requests with and without the patches).
"""

from __future__ import annotations

import functools
import pickle
import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

#: Expressions remembered per memo (distinct expression strings; the ledger uses a few dozen).
MEMO_SIZE = 1024

#: Attribute set on a memoised update-expression tree: the string it was parsed from (kept by
#: the deep copy the validator makes, so a pass can tell which expression it is checking).
_SOURCE = "_s3ingest_expression"
#: Attribute set on a memoised update-expression tree: its pickle (a copy from it is what
#: ``deepcopy`` gives, about 3 times faster).
_PICKLED = "_s3ingest_pickled"

_INSTALL_LOCK = threading.RLock()
#: The patches in force (names of the functions below that applied them).
_installed: set[str] = set()
#: Every patch of this module, in the order :func:`install` applies them.
_PATCHES: list[Callable[[], None]] = []
#: The originals, for :func:`uninstall` (tests compare patched and unpatched moto in one process).
_originals: list[tuple[Any, str, Any]] = []


def installed() -> bool:
    """Whether any patch of this module is in force in this process."""
    return bool(_installed)


def install() -> None:
    """Apply every patch of this module (idempotent, thread-safe). See the module docstring.

    The emulator applies them one by one through :mod:`s3ingest.local.emulator.moto_patches`, which
    checks moto's version first; this is for tests comparing patched and unpatched moto."""
    with _INSTALL_LOCK:
        for patch in _PATCHES:
            patch()


def uninstall() -> None:
    """Restore unpatched moto (for tests comparing the two)."""
    with _INSTALL_LOCK:
        while _originals:
            owner, name, original = _originals.pop()
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        _installed.clear()


_INHERITED = object()


def _set(owner: Any, name: str, value: Any) -> None:
    _originals.append((owner, name, owner.__dict__.get(name, _INHERITED)))
    setattr(owner, name, value)


def _once(apply: Callable[[], None]) -> Callable[[], None]:
    """``apply``, made idempotent and thread-safe, and listed in :data:`_PATCHES`."""

    @functools.wraps(apply)
    def once() -> None:
        with _INSTALL_LOCK:
            if apply.__name__ not in _installed:
                apply()
                _installed.add(apply.__name__)

    _PATCHES.append(once)
    return once


@_once
def memoise_update_expressions() -> None:
    from moto.dynamodb.parsing.expressions import (  # type: ignore[attr-defined]
        UpdateExpressionParser,
    )

    make = UpdateExpressionParser.make  # bound classmethod

    @functools.lru_cache(maxsize=MEMO_SIZE)
    def parse(expression_str: str) -> Any:
        tree = make(expression_str)
        setattr(tree, _SOURCE, expression_str)
        setattr(tree, _PICKLED, pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL))
        return tree

    def memoised(expression_str: Any) -> Any:
        if not isinstance(expression_str, str):
            return make(expression_str)
        return parse(expression_str)

    _set(UpdateExpressionParser, "make", staticmethod(memoised))


@_once
def copy_trees_from_pickles() -> None:
    from moto.dynamodb.parsing import validators

    deepcopy = validators.deepcopy

    def copy_tree(obj: Any, memo: Any = None) -> Any:
        pickled = obj.__dict__.get(_PICKLED) if memo is None and hasattr(obj, "__dict__") else None
        if pickled is None:
            return deepcopy(obj, memo)
        return pickle.loads(pickled)  # the tree as parsed, with _SOURCE and without _PICKLED

    _set(validators, "deepcopy", copy_tree)


def _names_key(names: dict[str, str] | None) -> Hashable:
    return tuple(sorted((names or {}).items()))


@_once
def remember_accepting_passes() -> None:
    from moto.dynamodb.parsing.validators import (
        ActionCountValidator,
        OverlappingPathsValidator,
        UpdateHashRangeKeyValidator,
    )

    passes: list[tuple[Any, Callable[[Any], Hashable]]] = [
        (ActionCountValidator, lambda self: ()),
        (OverlappingPathsValidator, lambda self: _names_key(self.expression_attribute_names)),
        (
            UpdateHashRangeKeyValidator,
            lambda self: (
                tuple(self.table_key_attributes),
                _names_key(self.expression_attribute_names),
            ),
        ),
    ]
    for cls, inputs in passes:
        _set(cls, "traverse", _remember_acceptance(cls.traverse, inputs))


def _remember_acceptance(
    traverse: Callable[[Any, Any], Any], inputs: Callable[[Any], Hashable]
) -> Callable[[Any, Any], Any]:
    """``traverse`` of a pass that only checks: skipped when it already accepted this expression
    with the same inputs (it then returned the very node it was given). A tree not parsed by the
    memoised parser, or a pass that raises, runs as in moto."""
    accepted: dict[Hashable, None] = {}
    lock = threading.Lock()

    def remembering(self: Any, node: Any) -> Any:
        source = getattr(node, _SOURCE, None)
        if source is None:
            return traverse(self, node)
        try:
            key = (source, inputs(self))
            known = key in accepted
        except TypeError:  # unhashable or unorderable inputs of a malformed request
            return traverse(self, node)
        if known:
            return node
        result = traverse(self, node)
        if result is node:
            with lock:
                if len(accepted) >= MEMO_SIZE:
                    accepted.clear()
                accepted[key] = None
        return result

    return remembering


@_once
def memoise_condition_tokens() -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    lex = ConditionExpressionParser._lex_condition_expression

    @functools.lru_cache(maxsize=MEMO_SIZE)
    def tokens(expression: str) -> tuple[Any, ...]:
        parser = ConditionExpressionParser(expression, None, None)
        return tuple(lex(parser))

    def memoised(self: Any) -> deque[Any]:
        if not isinstance(self.condition_expression, str):
            return lex(self)
        # fresh nodes (their ``children`` lists are not shared between requests)
        return deque(node._replace(children=[]) for node in tokens(self.condition_expression))

    _set(ConditionExpressionParser, "_lex_condition_expression", memoised)


@_once
def count_queue_attributes_once() -> None:
    from moto.sqs.exceptions import InvalidAttributeName
    from moto.sqs.models import SQSBackend

    def get_queue_attributes(
        self: Any, queue_name: str, attribute_names: list[str]
    ) -> dict[str, Any]:
        # moto 5.2's body, with queue.attributes (a walk over every message) computed once
        queue = self.get_queue(queue_name)
        if not attribute_names:
            return {}
        valid_names = ["All", *queue.BASE_ATTRIBUTES, *queue.FIFO_ATTRIBUTES, *queue.KMS_ATTRIBUTES]
        invalid_name = next((name for name in attribute_names if name not in valid_names), None)
        if invalid_name or invalid_name == "":
            raise InvalidAttributeName(invalid_name)
        current = queue.attributes
        if "All" in attribute_names:
            return dict(current)
        return {
            name: current[name]
            for name in attribute_names
            if name in current and current.get(name) is not None
        }

    _set(SQSBackend, "get_queue_attributes", get_queue_attributes)
    _patch_queue_attributes()


def _message_counts(messages: Any, now: float) -> dict[str, int]:
    """moto 5.2's three message counts of a queue, taken in one walk over its messages (moto walks
    them once per count, and SendMessage asks for all of it)."""
    visible = delayed = not_visible = 0
    for message in messages:
        if now < message.delayed_until:
            delayed += 1
        if not now > message.visible_at:
            not_visible += 1
        elif not now < message.delayed_until:
            visible += 1
    return {
        "ApproximateNumberOfMessages": visible,
        "ApproximateNumberOfMessagesDelayed": delayed,
        "ApproximateNumberOfMessagesNotVisible": not_visible,
    }


def _patch_queue_attributes() -> None:
    from moto.sqs import models
    from moto.sqs.models import Queue

    field = functools.lru_cache(maxsize=64)(models.camelcase_to_underscores)

    def attributes(self: Any) -> dict[str, Any]:
        # moto 5.2's Queue.attributes, with the counts from _message_counts
        counts = _message_counts(self._messages, models.unix_time_millis())
        result: dict[str, Any] = {
            name: counts[name] if name in counts else getattr(self, field(name))
            for name in self.BASE_ATTRIBUTES
        }
        for present, names in (
            (self.fifo_queue, self.FIFO_ATTRIBUTES),
            (self.kms_master_key_id, self.KMS_ATTRIBUTES),
        ):
            if present:
                result.update({name: getattr(self, field(name)) for name in names})
        if self.policy:
            result["Policy"] = self.policy
        if self.redrive_policy:
            result["RedrivePolicy"] = models.json.dumps(self.redrive_policy)
        return {k: str(v).lower() if isinstance(v, bool) else v for k, v in result.items()}

    _set(Queue, "attributes", property(attributes))

    def pending_message_groups(self: Any) -> set[str]:
        # moto 5.2's, over a copy of the in-flight set: its set comprehension runs Python code
        # per message, so a DeleteMessage on another thread of the server changed the set mid-walk
        # ("Set changed size during iteration" from ReceiveMessage); tuple() copies it in one step
        return {m.group_id for m in tuple(self._pending_messages) if m.group_id is not None}

    _set(Queue, "pending_message_groups", property(pending_message_groups))


@_once
def memoise_event_input_paths() -> None:
    import jsonpath_ng.ext

    parse = jsonpath_ng.ext.parse

    @functools.lru_cache(maxsize=MEMO_SIZE)
    def parse_path(path: str) -> Any:
        return parse(path)

    def memoised(path: Any, debug: bool = False) -> Any:
        if debug or not isinstance(path, str):
            return parse(path, debug=debug)
        return parse_path(path)

    _set(jsonpath_ng.ext, "parse", memoised)


@_once
def list_moto_modules_once() -> None:
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())

    def list_of_moto_modules() -> tuple[str, ...]:
        return modules

    _set(backends, "list_of_moto_modules", list_of_moto_modules)


@_once
def sort_string_hash_keys_natively() -> None:
    from moto.dynamodb.models.table import Table

    original = Table.all_items

    def all_items(self: Any) -> list[Any]:
        if self.range_key_attr:
            return original(self)
        items = list(self.items.values())
        if not all(item.hash_key.type == "S" for item in items):
            return original(self)
        # moto 5.2's body sorts by the hash key's DynamoType: for strings, by their values
        return sorted(items, key=lambda item: item.hash_key.value)

    _set(Table, "all_items", all_items)
