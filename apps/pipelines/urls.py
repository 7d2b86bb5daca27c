from django.urls import path

from apps.pipelines import degrade_views, no_stage_views, views

app_name = "pipelines"

STAGE = "<slug:pipeline_slug>/stages/<int:stage_id>/"
RULE = STAGE + "rules/<int:rule_id>/"
NO_STAGE_RULE = "<slug:pipeline_slug>/no-stage-rules/<int:rule_id>/"

urlpatterns = [
    path("", views.pipeline_list, name="list"),
    path("new/", views.pipeline_create_view, name="create"),
    path("<slug:pipeline_slug>/", views.pipeline_detail, name="detail"),
    path("<slug:pipeline_slug>/edit/", views.pipeline_edit, name="edit"),
    path("<slug:pipeline_slug>/delete/", views.pipeline_delete_view, name="delete"),
    path("<slug:pipeline_slug>/stages/new/", views.stage_add, name="stage_add"),
    path(STAGE + "edit/", views.stage_edit, name="stage_edit"),
    path(STAGE + "delete/", views.stage_delete_view, name="stage_delete"),
    path(STAGE + "move/", views.stage_move_view, name="stage_move"),
    path(STAGE + "degrade/", degrade_views.stage_degrade_edit, name="stage_degrade"),
    path(STAGE + "rules/new/", views.rule_add, name="rule_add"),
    path(RULE + "edit/", views.rule_edit, name="rule_edit"),
    path(RULE + "delete/", views.rule_delete, name="rule_delete"),
    path(
        "<slug:pipeline_slug>/no-stage-rules/new/",
        no_stage_views.no_stage_rule_add,
        name="no_stage_rule_add",
    ),
    path(NO_STAGE_RULE + "edit/", no_stage_views.no_stage_rule_edit, name="no_stage_rule_edit"),
    path(
        NO_STAGE_RULE + "delete/",
        no_stage_views.no_stage_rule_delete_view,
        name="no_stage_rule_delete",
    ),
]
