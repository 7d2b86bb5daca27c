"""Items whose pass keeps killing its worker: found, tried alone, then quarantined.

A pass that raises is handled by ``isolation``. One that never returns (its worker
killed for memory, a segfault in a library) rolls back with nothing recorded, its
task is redelivered (``acks_late``) and the same items kill the next worker too: a
loop that stops the pass for every team.

So a pass writes down what it is about to work on, in a transaction of its own
(``claim_open``), and deletes that note in the transaction that commits its work
(``claim_close``). A note whose database session is gone belongs to a pass that
died: each of its items gets a strike (``crash_strikes``). An item with a strike is
then worked on alone, and one with ``PASS_CRASH_STRIKES`` is quarantined instead;
every other item goes on in passes of the usual size.

Sessions are named by backend pid and start time, which PostgreSQL shows every
role in ``pg_stat_activity``. A pooler that shares sessions between clients
(PgBouncer in transaction mode) would hide a dead pass behind a live session;
connect the workers to PostgreSQL directly, or in session mode.
"""

import logging
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F
from django.db.models.expressions import RawSQL
from django.utils import timezone

from apps.core.isolation import pass_with_fallback
from apps.core.models import CrashStrike, PassClaim

logger = logging.getLogger(__name__)
R = TypeVar("R")


class WorkerDied(Exception):
    """The reason an item is quarantined after its passes died with it."""

    def __init__(self, strikes: int) -> None:
        super().__init__(f"its pass stopped without finishing {strikes} times (the worker died)")


_TABLE = PassClaim._meta.db_table
_OPEN = f"""
    INSERT INTO {_TABLE} (kind, item_ids, backend_pid, backend_start, claimed_at)
    SELECT %s, %s, pg_backend_pid(),
        (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()), %s
    RETURNING id
"""
# Claims whose session is gone; locked so that two passes never count one crash twice.
_DEAD = f"""
    SELECT c.id, c.item_ids FROM {_TABLE} AS c
    WHERE c.kind = %s AND NOT EXISTS (
        SELECT 1 FROM pg_stat_activity AS a
        WHERE a.pid = c.backend_pid
            AND a.backend_start IS NOT DISTINCT FROM c.backend_start
    )
    FOR UPDATE SKIP LOCKED
"""


def claimed_ids(*, kind: str) -> RawSQL:
    """The items other passes of ``kind`` have claimed: for ``.exclude(pk__in=…)``.

    A claim is committed before its pass locks its items, so without this two passes
    starting together would pick the same oldest items and one of them would idle.
    """
    return RawSQL(f"SELECT unnest(item_ids) FROM {_TABLE} WHERE kind = %s", [kind])


def claim_open(*, kind: str, item_ids: list[int]) -> int:
    """Record the items a pass is about to work on; commits at once outside a transaction."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_OPEN, [kind, item_ids, timezone.now()])
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def claim_close(claim_id: int) -> None:
    """Inside the pass's transaction: the claim goes when the pass's work commits."""
    PassClaim.objects.filter(pk=claim_id).delete()


def claim_abandon(claim_id: int) -> None:
    """After a pass that raised: it did not crash, so its items earn no strike."""
    try:
        PassClaim.objects.filter(pk=claim_id).delete()
    except DatabaseError:
        # The database is away or refusing writes. Ending the session makes the claim
        # read as a crash, which costs its items one pass on their own; a live session
        # would keep them claimed, out of every pass, for as long as it lasts.
        logger.warning("claim %s of a failed pass could not be removed", claim_id)
        if not connection.in_atomic_block:
            connection.close()


def crash_strikes(*, kind: str) -> dict[int, int]:
    """Items of ``kind`` whose passes died, with how often; dead claims become strikes."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_DEAD, [kind])
            dead = cursor.fetchall()
        for claim_id, item_ids in dead:
            logger.warning(
                "a %s pass died without finishing (claim %s); its %d items are tried alone",
                kind,
                claim_id,
                len(item_ids),
            )
            for item_id in item_ids:
                updated = CrashStrike.objects.filter(kind=kind, item_id=item_id).update(
                    strikes=F("strikes") + 1
                )
                if not updated:
                    CrashStrike.objects.create(kind=kind, item_id=item_id)
        if dead:
            PassClaim.objects.filter(pk__in=[claim_id for claim_id, _ in dead]).delete()
        return dict(CrashStrike.objects.filter(kind=kind).values_list("item_id", "strikes"))


def strikes_clear(*, kind: str, item_ids: list[int]) -> None:
    CrashStrike.objects.filter(kind=kind, item_id__in=item_ids).delete()


def claimed_run(claim_id: int, run: Callable[[bool], R]) -> R:
    """A pass under its claim (see ``isolation.pass_with_fallback`` for ``run``'s flag).

    A pass that raises did not crash: its claim goes, and its items earn no strike.
    """
    try:
        return pass_with_fallback(run)
    except BaseException:
        claim_abandon(claim_id)
        raise


def suspect_run(
    *,
    kind: str,
    item_id: int,
    strikes: int,
    quarantine: Callable[[WorkerDied], R],
    run: Callable[[int, bool], R],
) -> R:
    """One item whose passes died ``strikes`` times: quarantined, or worked on alone.

    ``run(claim_id, isolate)`` is the usual pass over this item only; ``quarantine``
    sets the item aside, in the transaction that clears its strikes.
    """
    if strikes >= settings.PASS_CRASH_STRIKES:
        with transaction.atomic():
            result = quarantine(WorkerDied(strikes))
            strikes_clear(kind=kind, item_ids=[item_id])
        return result
    claim = claim_open(kind=kind, item_ids=[item_id])
    result = claimed_run(claim, lambda isolate: run(claim, isolate))
    strikes_clear(kind=kind, item_ids=[item_id])
    return result
