from django.urls import path

from apps.dashboards.views import dashboards, details, recompute, unmatched_spans, whatif

app_name = "dashboards"

urlpatterns = [
    path("", dashboards.team_home, name="team_home"),
    path("<slug:pipeline_slug>/", dashboards.pipeline_dashboard, name="pipeline"),
    path("<slug:pipeline_slug>/fit/", details.fit_check, name="fit"),
    path("<slug:pipeline_slug>/recompute/", recompute.recompute_panel, name="recompute"),
    path(
        "<slug:pipeline_slug>/recompute/start/",
        recompute.recompute_start,
        name="recompute_start",
    ),
    path("<slug:pipeline_slug>/whatif/", whatif.whatif_page_view, name="whatif"),
    path("<slug:pipeline_slug>/whatif/save/", whatif.whatif_save, name="whatif_save"),
    path(
        "<slug:pipeline_slug>/whatif/scenarios/<int:scenario_id>/delete/",
        whatif.whatif_scenario_delete,
        name="whatif_scenario_delete",
    ),
    path("<slug:pipeline_slug>/fit/apply/", details.fit_apply, name="fit_apply"),
    path(
        "<slug:pipeline_slug>/unmatched-spans/",
        unmatched_spans.unmatched_spans_view,
        name="unmatched_spans",
    ),
    path(
        "<slug:pipeline_slug>/unmatched-spans/rule/",
        unmatched_spans.unmatched_rule_view,
        name="unmatched_rule",
    ),
    path(
        "<slug:pipeline_slug>/stages/<int:stage_id>/rule-test/",
        details.rule_tester,
        name="rule_test",
    ),
    path(
        "<slug:pipeline_slug>/no-stage-rule-test/",
        details.no_stage_rule_tester,
        name="no_stage_rule_test",
    ),
    path(
        "<slug:pipeline_slug>/stages/<slug:stage_slug>/",
        details.stage_dashboard,
        name="stage",
    ),
]
