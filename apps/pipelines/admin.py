from django.contrib import admin

from apps.pipelines.models import NoStageRule, Pipeline, SpanRule, Stage


class StageInline(admin.TabularInline):
    model = Stage
    extra = 0


class NoStageRuleInline(admin.TabularInline):
    model = NoStageRule
    extra = 0


@admin.register(Pipeline)
class PipelineAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "team", "budget_p95_ms"]
    list_filter = ["team"]
    inlines = [StageInline, NoStageRuleInline]


class SpanRuleInline(admin.TabularInline):
    model = SpanRule
    extra = 0


@admin.register(Stage)
class StageAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "pipeline", "budget_percentile", "budget_ms"]
    inlines = [SpanRuleInline]
