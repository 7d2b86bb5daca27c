from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.models import QuarantinedItem, QuarantineKind
from apps.core.quarantine import quarantine_release


class Command(BaseCommand):
    help = (
        "List the items the shared passes set aside (raw batches, traces, rollup buckets, "
        "budget evaluations), or put them back into their passes after a fix."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", nargs="?", choices=["list", "retry"], default="list")
        parser.add_argument(
            "--kind", choices=[kind.value for kind in QuarantineKind], help="Only this kind."
        )
        parser.add_argument(
            "--id", dest="ids", type=int, action="append", help="Only this item id (repeatable)."
        )
        parser.add_argument(
            "--all", action="store_true", help="retry: every held item; list: released ones too."
        )

    def handle(
        self, *args: Any, action: str, kind: str | None, ids: list[int] | None, all: bool, **_: Any
    ) -> None:
        if action == "retry":
            if not (all or kind or ids):
                raise CommandError("Name what to retry: --kind, --id, or --all for every item.")
            released = quarantine_release(kind=kind, item_ids=ids)
            self.stdout.write(f"Released {released} item{'' if released == 1 else 's'}.")
            return
        items = QuarantinedItem.objects.order_by("kind", "-last_quarantined_at")
        if not all:
            items = items.filter(released_at__isnull=True)
        if kind:
            items = items.filter(kind=kind)
        if ids:
            items = items.filter(item_id__in=ids)
        rows = list(items)
        if not rows:
            self.stdout.write("Nothing is quarantined.")
            return
        for item in rows:
            state = "held" if item.released_at is None else f"released {item.released_at:%F %T}"
            self.stdout.write(
                f"{item.kind:<14} {item.item_id:>10}  team {item.team_id or '-':<6} "
                f"x{item.times:<3} {item.last_quarantined_at:%F %T}  {state}  {item.reason}"
            )
