"""Items that a shared pass could not process, kept out of the way with their reason.

Every shared pass (drain, finalization, rollups, evaluation) works on items of many
teams at once. One item that raises, or runs past its time budget, must not stop the
others: the pass rolls that item back, records it here and leaves it out of later
passes, so it is never retried in a loop. The item's own row carries the state that
keeps it out (a raw batch's ``last_error``, a trace's quarantined state, a dirty
bucket's or an evaluation mark's ``quarantined_at``); this table is what operators
read (admin, ``/readyz`` for staff, ``manage.py quarantine``) and what a retry
releases.
"""

from collections.abc import Callable

from django.db import models
from django.db.models import Count, F
from django.utils import timezone

from apps.core.models import QuarantinedItem, QuarantineKind

REASON_MAX = 2000

# How each kind's item is put back into its pass; registered by the app that owns it.
_RELEASERS: dict[str, Callable[[list[int]], int]] = {}


def quarantine_releaser_register(kind: str, release: Callable[[list[int]], int]) -> None:
    _RELEASERS[kind] = release


def quarantine_record(*, kind: str, item_id: int, team_id: int | None, reason: str) -> None:
    """Record (or record again) an item as quarantined; its pass has already set it aside."""
    now = timezone.now()
    reason = reason[:REASON_MAX]
    updated = QuarantinedItem.objects.filter(kind=kind, item_id=item_id).update(
        reason=reason,
        times=F("times") + 1,
        last_quarantined_at=now,
        released_at=None,
        team_id=team_id,
    )
    if not updated:
        QuarantinedItem.objects.create(
            kind=kind,
            item_id=item_id,
            team_id=team_id,
            reason=reason,
            first_quarantined_at=now,
            last_quarantined_at=now,
        )


def quarantine_release(*, kind: str | None = None, item_ids: list[int] | None = None) -> int:
    """Put held items back into their passes (after a fix); the number released."""
    held = QuarantinedItem.objects.filter(released_at__isnull=True)
    if kind is not None:
        held = held.filter(kind=kind)
    if item_ids is not None:
        held = held.filter(item_id__in=item_ids)
    released = 0
    by_kind: dict[str, list[int]] = {}
    for item_kind, item_id in held.values_list("kind", "item_id"):
        by_kind.setdefault(item_kind, []).append(item_id)
    for item_kind, ids in by_kind.items():
        _RELEASERS[item_kind](ids)
        released += QuarantinedItem.objects.filter(
            kind=item_kind, item_id__in=ids, released_at__isnull=True
        ).update(released_at=timezone.now())
    return released


def quarantine_counts() -> dict[str, int]:
    """Held items per kind, every kind named (0 when none)."""
    rows = (
        QuarantinedItem.objects.filter(released_at__isnull=True)
        .values("kind")
        .annotate(n=Count("id"))
    )
    counts = {kind.value: 0 for kind in QuarantineKind}
    counts.update({row["kind"]: row["n"] for row in rows})
    return counts


def quarantine_latest(limit: int = 10) -> models.QuerySet[QuarantinedItem]:
    return QuarantinedItem.objects.filter(released_at__isnull=True).order_by(
        "-last_quarantined_at"
    )[:limit]


def quarantine_reason(*, kind: str, item_id: int) -> str | None:
    """Why an item is held, or None when it is not."""
    return (
        QuarantinedItem.objects.filter(kind=kind, item_id=item_id, released_at__isnull=True)
        .values_list("reason", flat=True)
        .first()
    )
