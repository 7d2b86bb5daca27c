"""The one skeleton of every shared pass: due items claimed, worked on, written or set aside.

A shared pass (the drain of raw batches, the finalization of traces, a recompute's
batch, the rollup of dirty buckets) works on items of many teams at once. A pass says
what is particular to it, as the methods of an ``IsolatedPass``: which items wait and
which are due, how one item is worked on, how a group is written, how one item is set
aside. ``pass_run`` does the rest, the same way for every pass:

1. items whose earlier passes died with their worker (``crash_guard``) go first, each
   alone, or are quarantined once they have killed ``PASS_CRASH_STRIKES`` passes;
2. the due items are chosen within the pass's budget, past what other passes hold,
   and claimed in a transaction of their own;
3. the pass's transaction commits without waiting for disk (the work is redone when
   lost) and bounds every statement by ``PASS_STATEMENT_TIMEOUT_S``; it locks the
   items still due, and the claim goes when the work commits;
4. each item is worked on under ``item_time_budget_s``; one that raises is set aside;
5. the group is written at once; if the database refuses it, the pass rolls back and
   runs again with each item written in a savepoint of its own (``isolation``).

Passes whose items need a transaction each (an evaluation per pipeline, per alert
rule) run them through ``item_alone``.
"""

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any, ClassVar, Generic, TypeVar

from django.db import transaction
from django.db.models import QuerySet

from apps.core.crash_guard import (
    WorkerDied,
    claim_close,
    claim_open,
    claimed_ids,
    claimed_run,
    crash_strikes,
    strikes_clear,
    suspect_run,
)
from apps.core.isolation import (
    ItemDeadline,
    is_transient,
    items_run,
    pass_statement_timeout,
    pass_with_fallback,
)
from apps.core.transactions import commit_without_waiting

Item = TypeVar("Item")  # what the pass locks: a trace, a raw batch, a dirty bucket's row
Done = TypeVar("Done")  # an item worked on, waiting to be written
Written = TypeVar("Written")  # what writing a group returns
R = TypeVar("R")

# (item id, spans, bytes): what a pass's budget counts of a due item.
Candidate = tuple[int, int, int]


@dataclass
class PassOutcome(Generic[Item, Written]):
    """What one pass did; ``written`` holds one entry per group that commits."""

    claimed: list[int] = field(default_factory=list)  # the ids it set out to work on
    locked: int = 0  # of those, still due when locked
    worked: int = 0  # of those, worked on (``begin`` may leave some out)
    written: list[Written] = field(default_factory=list)
    quarantined: list[Item] = field(default_factory=list)
    # Items once suspected of killing a pass, found done or set aside since.
    suspects_cleared: int = 0


class IsolatedPass(ABC, Generic[Item, Done, Written]):
    """What one kind of shared pass supplies to ``pass_run``."""

    # Its claims and crash strikes are filed under it.
    kind: ClassVar[str]
    # Claim the items in a transaction of their own first, so that a pass that dies
    # with its worker is seen. Without it the items are chosen and locked in the
    # pass's transaction (cheaper, for passes that cannot kill a worker).
    crash_guard: ClassVar[bool] = True
    # The items are taken in their order and a cursor moves past them (a recompute):
    # a suspect goes alone when it comes first and ends the group before it otherwise,
    # never skipped; other passes' items are not this pass's to judge.
    in_order: ClassVar[bool] = False
    # Of ``work``, per item; 0 leaves it unbounded.
    item_time_budget_s: float = 0.0
    max_items: int = 500
    max_spans: int = sys.maxsize
    max_bytes: int = sys.maxsize

    @abstractmethod
    def waiting(self) -> QuerySet[Any]:
        """The items waiting for this pass: neither done nor set aside."""

    def due(self, waiting: QuerySet[Any]) -> QuerySet[Any]:
        """Those of ``waiting`` due now, in the order they are to be worked on."""
        return waiting

    def candidates(self, due: QuerySet[Any]) -> Iterable[Candidate]:
        """The first ``max_items`` due items with the spans and bytes they weigh."""
        return ((pk, 0, 0) for pk in due.values_list("pk", flat=True)[: self.max_items])

    def begin(self, items: list[Item]) -> list[Item]:
        """Work shared by the locked items (load, compile); the items to work on."""
        return items

    @abstractmethod
    def work(self, item: Item) -> Done:
        """One item's work, in Python; raising sets the item aside."""

    @abstractmethod
    def write(self, group: Sequence[Done]) -> Written:
        """Write a group's results; a refusal of the database sets its item aside."""

    @abstractmethod
    def item_of(self, done: Done) -> Item: ...

    @abstractmethod
    def quarantine(self, item: Item, reason: BaseException) -> None:
        """Set the item aside with its reason, out of later passes."""

    def finish(self, outcome: PassOutcome[Item, Written]) -> None:
        """In the pass's transaction, after its writes: what commits with them."""


def pass_run(work: IsolatedPass[Item, Done, Written]) -> PassOutcome[Item, Written]:
    """One pass of ``work``: see the module's docstring for what it does, in order."""
    if not work.crash_guard:
        return pass_with_fallback(lambda isolate: _unclaimed_pass(work, isolate=isolate))
    suspects = crash_strikes(kind=work.kind)
    cleared = 0
    if suspects:
        suspect, cleared = _suspect_first(work, suspects)
        if suspect is not None:
            outcome = suspect_run(
                kind=work.kind,
                item_id=suspect,
                strikes=suspects[suspect],
                quarantine=lambda reason: _suspect_quarantine(work, suspect, reason),
                run=lambda claim, isolate: _claimed_pass(work, [suspect], claim, isolate=isolate),
            )
            outcome.suspects_cleared = cleared
            return outcome
    with transaction.atomic():
        ids = _chosen(work, suspects)
        claim = claim_open(kind=work.kind, item_ids=ids) if ids else None
    if claim is None:
        return PassOutcome(suspects_cleared=cleared)
    outcome = claimed_run(claim, lambda isolate: _claimed_pass(work, ids, claim, isolate=isolate))
    outcome.suspects_cleared = cleared
    return outcome


def _suspect_first(
    work: IsolatedPass[Any, Any, Any], suspects: dict[int, int]
) -> tuple[int | None, int]:
    """The suspect to work on alone now, if any, and how many suspects were found gone."""
    due = work.due(work.waiting())
    if work.in_order:
        first = next(iter(work.candidates(due)), None)
        return (first[0] if first is not None and first[0] in suspects else None), 0
    waiting = set(work.waiting().filter(pk__in=list(suspects)).values_list("pk", flat=True))
    gone = [pk for pk in suspects if pk not in waiting]
    if gone:  # done by another pass, or set aside already
        strikes_clear(kind=work.kind, item_ids=gone)
    return due.filter(pk__in=waiting).values_list("pk", flat=True).first(), len(gone)


def _chosen(work: IsolatedPass[Any, Any, Any], suspects: dict[int, int]) -> list[int]:
    """The due items this pass takes, within its budget; the first is always taken."""
    due = work.due(work.waiting())
    rows: Iterable[Candidate]
    if work.in_order:
        rows = takewhile(lambda row: row[0] not in suspects, work.candidates(due))
    else:
        # Claims are committed before their passes lock, so without the exclusion two
        # passes starting together would pick the same oldest items and one would idle.
        due = due.exclude(pk__in=list(suspects)).exclude(pk__in=claimed_ids(kind=work.kind))
        rows = work.candidates(due.select_for_update(skip_locked=True))
    ids: list[int] = []
    spans = size = 0
    for item_id, span_count, byte_count in rows:
        spans += span_count
        size += byte_count
        if ids and (spans > work.max_spans or size > work.max_bytes):
            break
        ids.append(item_id)
    return ids


def _suspect_quarantine(
    work: IsolatedPass[Item, Any, Written], item_id: int, reason: WorkerDied
) -> PassOutcome[Item, Written]:
    locked = work.waiting().filter(pk=item_id).select_for_update(skip_locked=True)
    outcome: PassOutcome[Item, Written] = PassOutcome(claimed=[item_id])
    for item in locked:
        work.quarantine(item, reason)
        outcome.locked += 1
        outcome.quarantined.append(item)
    work.finish(outcome)
    return outcome


def _claimed_pass(
    work: IsolatedPass[Item, Any, Written], ids: list[int], claim: int, *, isolate: bool
) -> PassOutcome[Item, Written]:
    with transaction.atomic():
        commit_without_waiting()  # a lost commit leaves the items due: redone
        pass_statement_timeout()
        # Due again: an item may have changed since it was claimed.
        locked = work.due(work.waiting()).filter(pk__in=ids).select_for_update(skip_locked=True)
        items = list(locked)
        claim_close(claim)  # commits with the items' work, or not at all
        outcome: PassOutcome[Item, Written] = PassOutcome(claimed=ids, locked=len(items))
        if items:
            _items_process(work, items, outcome, isolate=isolate)
        work.finish(outcome)
        return outcome


def _unclaimed_pass(
    work: IsolatedPass[Item, Any, Written], *, isolate: bool
) -> PassOutcome[Item, Written]:
    with transaction.atomic():
        commit_without_waiting()  # a lost commit leaves the items due: redone
        pass_statement_timeout()
        locked = work.due(work.waiting()).select_for_update(skip_locked=True)
        items = list(locked[: work.max_items])
        outcome: PassOutcome[Item, Written] = PassOutcome(locked=len(items))
        if items:
            _items_process(work, items, outcome, isolate=isolate)
        work.finish(outcome)
        return outcome


def _items_process(
    work: IsolatedPass[Item, Done, Written],
    items: list[Item],
    outcome: PassOutcome[Item, Written],
    *,
    isolate: bool,
) -> None:
    chosen = work.begin(items)
    outcome.worked = len(chosen)
    failed: list[tuple[Item, BaseException]] = []
    done: list[Done] = []
    with ItemDeadline(work.item_time_budget_s) as deadline:
        for item in chosen:
            try:
                deadline.restart()
                result = work.work(item)
                deadline.stop()
            except Exception as exc:
                deadline.disarm()
                if is_transient(exc):
                    raise
                failed.append((item, exc))
                continue
            done.append(result)
    outcome.written = items_run(
        done,
        work.write,
        isolate=isolate,
        on_failure=lambda one, exc: failed.append((work.item_of(one), exc)),
    )
    for item, reason in failed:
        work.quarantine(item, reason)
        outcome.quarantined.append(item)


def item_alone(work: Callable[[], R], *, on_failure: Callable[[BaseException], R]) -> R:
    """One item of a pass whose items each run in a transaction of their own (``work``
    opens it): a failure of the item's own goes to ``on_failure`` and the pass goes on;
    a failure of the database ends the pass, for the next one to redo."""
    try:
        return work()
    except Exception as exc:
        if is_transient(exc):
            raise
        return on_failure(exc)
