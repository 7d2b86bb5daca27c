from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.core.models import QuarantinedItem
from apps.core.quarantine import quarantine_release


@admin.register(QuarantinedItem)
class QuarantinedItemAdmin(admin.ModelAdmin):
    list_display = [
        "kind", "item_id", "team_id", "reason", "times", "last_quarantined_at", "released_at",
    ]  # fmt: skip
    list_filter = ["kind", ("released_at", admin.EmptyFieldListFilter)]
    search_fields = ["reason"]
    readonly_fields = [field.name for field in QuarantinedItem._meta.fields]
    actions = ["retry"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Retry: put back into its pass")
    def retry(self, request: HttpRequest, queryset: QuerySet[QuarantinedItem]) -> None:
        released = 0
        for kind in set(queryset.values_list("kind", flat=True)):
            ids = list(queryset.filter(kind=kind).values_list("item_id", flat=True))
            released += quarantine_release(kind=kind, item_ids=ids)
        self.message_user(request, f"Released {released} item(s).", messages.SUCCESS)
