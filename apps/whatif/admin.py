from django.contrib import admin

from apps.whatif.models import SavedScenario, WhatIfRun


@admin.register(WhatIfRun)
class WhatIfRunAdmin(admin.ModelAdmin):
    list_display = ["pk", "kind", "pipeline", "team", "status", "attempts", "created_at"]
    list_filter = ["status", "kind"]
    readonly_fields = ["key", "params", "result", "error", "started_at", "finished_at"]


@admin.register(SavedScenario)
class SavedScenarioAdmin(admin.ModelAdmin):
    list_display = ["name", "pipeline", "created_by", "updated_at"]
