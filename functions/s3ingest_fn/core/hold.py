"""Hold for review: a policy between the ledger and the effects (``docs/hold.md``).

The ledger always follows the bucket; a hold policy only decides, per processor, whether the
effect of an applied change runs now, waits for an operator (``held``), or is skipped. The
policy is evaluated when the effect would start (:class:`~s3ingest_fn.core.decide.IngestService`
asks :meth:`HoldPolicy.decide` just before running the processor); a held effect stays on the
row (:class:`~s3ingest_fn.core.row.Effect` ``held``, with :class:`Hold`) until ``approve``
(the effect then runs through the normal claim and commit, never asking the policy again) or
``reject`` (it never runs).

Settings form (context key ``hold``, or ``"hold"`` in one entry of ``processors``)::

    {"deletes": true}                                   # every removal
    {"deletes": {"above": 100, "windowSeconds": 300}}   # the mass-delete breaker
    {"prefixes": ["published/"]}                        # any change under these prefixes
    {"policy": "package.module:function"}               # the team's own answer

Keys combine: the first rule that holds wins, in the order prefixes, deletes, policy. The
breaker ranks the removals it sees per processor in tumbling windows of ``windowSeconds``
(:meth:`HoldCounter.rank`): within a window the first ``above`` distinct changes run and every
later one is held; a change asked again (a retry, an effect resumed after a crash, even in a
later window) keeps its rank, so its verdict. A team's policy is called as
``policy(change: AppliedChange) -> "run" | "skip" | "hold" | {"action", "reason"}`` and must be
a function of the change alone: it is asked again when an effect is resumed after a crash.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from s3ingest_fn.core.model import TransientError

#: What a policy answers for one change's effect.
RUN, HOLD, SKIP = "run", "hold", "skip"
ACTIONS = (RUN, HOLD, SKIP)
#: Why a change was held by the built-in rules (:attr:`Verdict.reason`).
REASON_DELETE = "delete"
REASON_PREFIX = "prefix"
REASON_MASS_DELETE = "mass-delete"
#: The breaker's window when the settings give none, seconds.
DEFAULT_WINDOW_SECONDS = 300
#: The largest ``above`` accepted.
MAX_ABOVE = 1_000_000
_KEYS = ("deletes", "prefixes", "policy")


@dataclass(frozen=True)
class Verdict:
    """A policy's answer: :data:`RUN`, :data:`HOLD` (with a ``reason``) or :data:`SKIP`."""

    action: str
    reason: str = ""


class HoldCounter(Protocol):
    """The breaker's shared counter (the ledger adapter keeps it in the ledger table)."""

    def rank(self, name: str, window: int, member: str, above: int, ttl_seconds: int) -> int:
        """``member``'s rank among the members of counter ``name`` in window ``window`` (epoch
        seconds // window length), given on its first call and the same on every later one (in
        any window); or ``above + 1`` once ``above`` members have a rank in the window. Expires
        ``ttl_seconds`` later.

        Raises
        ------
        TransientError
            The store failed (the caller's record is retried).
        """
        ...


class _Change(Protocol):
    """What a policy reads of a change (an :class:`~s3ingest_fn.core.effects.AppliedChange`)."""

    @property
    def key(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def change_id(self) -> str: ...


@dataclass(frozen=True)
class HoldPolicy:
    """One processor's hold policy (see the module docstring for the settings form).

    Attributes
    ----------
    deletes : bool
        Hold every removal.
    above, window_seconds : int or None, int
        The mass-delete breaker: hold removals beyond ``above`` within one window.
    prefixes : tuple of str
        Hold any change of a key under one of these.
    policy : callable or None
        The team's function (``policy_name`` names it).
    """

    deletes: bool = False
    above: int | None = None
    window_seconds: int = DEFAULT_WINDOW_SECONDS
    prefixes: tuple[str, ...] = ()
    policy: Callable[[Any], Any] | None = None
    policy_name: str = ""

    @property
    def active(self) -> bool:
        """Whether the policy can hold anything."""
        return bool(self.deletes or self.above is not None or self.prefixes or self.policy)

    @classmethod
    def of(cls, doc: Mapping[str, Any] | None, *, load: bool = True) -> HoldPolicy:
        """The policy of a settings document (None or ``{}``: holds nothing).

        ``load``: import the team's policy function (False: validate the form only).

        Raises
        ------
        ValueError
            An unknown key, a malformed value, or a policy function that cannot be imported.
        """
        errors = hold_errors(doc)
        if errors:
            raise ValueError("; ".join(errors))
        doc = doc or {}
        deletes = doc.get("deletes", False)
        above = window = None
        if isinstance(deletes, Mapping):
            above = int(deletes["above"])
            window = int(deletes.get("windowSeconds", DEFAULT_WINDOW_SECONDS))
            deletes = False
        name = str(doc.get("policy") or "")
        return cls(
            deletes=bool(deletes),
            above=above,
            window_seconds=window or DEFAULT_WINDOW_SECONDS,
            prefixes=tuple(doc.get("prefixes") or ()),
            policy=load_policy(name) if name and load else None,
            policy_name=name,
        )

    def decide(self, change: _Change, counter: HoldCounter, now_s: int, name: str) -> Verdict:
        """What to do with the effect of ``change`` for processor ``name``, at ``now_s``
        (epoch seconds).

        Parameters
        ----------
        change : AppliedChange
            Read: ``key``, ``kind``, ``change_id``; the team's policy gets it whole.
        counter : HoldCounter
            The breaker's ranks (the ledger adapter).

        Returns
        -------
        Verdict
            ``run``, ``skip``, or ``hold`` with its reason.

        Raises
        ------
        TransientError
            The team's policy raised or answered something else than :data:`ACTIONS` (the
            message is retried; nothing runs and nothing is lost, CONTRACT C9).
        """
        prefix = next((p for p in self.prefixes if change.key.startswith(p)), None)
        if prefix is not None:
            return Verdict(HOLD, f"{REASON_PREFIX}: {prefix}")
        if change.kind == "removed":
            if self.deletes:
                return Verdict(HOLD, REASON_DELETE)
            if self.above is not None:
                window = now_s // self.window_seconds
                rank = counter.rank(
                    f"breaker/{name}", window, change.change_id, self.above, 2 * self.window_seconds
                )
                if rank > self.above:
                    return Verdict(
                        HOLD,
                        f"{REASON_MASS_DELETE}: more than {self.above} deletes within "
                        f"{self.window_seconds} s",
                    )
        if self.policy is None:
            return Verdict(RUN)
        try:
            answer = self.policy(change)
        except Exception as exc:  # the team's code: retried, never lost
            raise TransientError(
                f"hold-policy-failed: {self.policy_name}: {exc.__class__.__name__}: {exc}"[:300]
            ) from exc
        return _verdict(answer, self.policy_name)


def _verdict(answer: Any, name: str) -> Verdict:
    if isinstance(answer, str) and answer in ACTIONS:
        return Verdict(answer, name if answer == HOLD else "")
    if isinstance(answer, Mapping) and answer.get("action") in ACTIONS:
        reason = str(answer.get("reason") or (name if answer["action"] == HOLD else ""))
        return Verdict(str(answer["action"]), reason[:200])
    raise TransientError(
        f"hold-policy-invalid-answer: {name} answered {answer!r:.100}; expected one of "
        f"{ACTIONS} or {{'action', 'reason'}}"
    )


def hold_errors(doc: Any) -> list[str]:
    """Every problem of a ``hold`` settings document, as readable sentences (empty: valid)."""
    if doc is None:
        return []
    if not isinstance(doc, Mapping):
        return [f"hold must be a JSON object, got {type(doc).__name__}"]
    errors = [
        f"hold: unknown key {key!r} (known: {', '.join(_KEYS)})" for key in doc if key not in _KEYS
    ]
    deletes = doc.get("deletes", False)
    if isinstance(deletes, Mapping):
        extra = set(deletes) - {"above", "windowSeconds"}
        above, window = deletes.get("above"), deletes.get("windowSeconds", DEFAULT_WINDOW_SECONDS)
        if extra:
            errors.append(f"hold.deletes: unknown keys {sorted(extra)}")
        if not (_count(above, 0) and isinstance(above, int) and above <= MAX_ABOVE):
            errors.append(f"hold.deletes.above must be an integer 0..{MAX_ABOVE}, got {above!r}")
        if not _count(window, 1) or window > 86_400:
            errors.append(f"hold.deletes.windowSeconds must be 1..86400, got {window!r}")
    elif not isinstance(deletes, bool):
        errors.append(
            f"hold.deletes must be true, false or {{'above', 'windowSeconds'}}: {deletes!r}"
        )
    prefixes = doc.get("prefixes", [])
    if not isinstance(prefixes, list) or not all(isinstance(p, str) and p for p in prefixes):
        errors.append(f"hold.prefixes must be a list of non-empty strings, got {prefixes!r}")
    policy = doc.get("policy")
    if policy is not None and (
        not isinstance(policy, str)
        or policy.count(":") != 1
        or policy.startswith(":")
        or policy.endswith(":")
    ):
        errors.append(f"hold.policy must be 'package.module:function', got {policy!r}")
    return errors


def _count(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def load_policy(spec: str) -> Callable[[Any], Any]:
    """Import the team's policy ``"package.module:function"``.

    Raises
    ------
    ValueError
        Malformed, not importable, or not callable (the function fails at cold start).
    """
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(
            f"hold policy module {module_name!r} cannot be imported: "
            f"{exc.__class__.__name__}: {exc}"
        ) from exc
    func = getattr(module, attr, None)
    if not callable(func):
        raise ValueError(f"hold policy {spec!r}: {attr!r} is not a callable in {module_name}")
    return func  # type: ignore[no-any-return]
