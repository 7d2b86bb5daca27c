from django.urls import path

from apps.pipelines import config_views

app_name = "config"

urlpatterns = [
    path("", config_views.config_page, name="page"),
    path("download/", config_views.config_download, name="download"),
    path("apply/", config_views.config_apply, name="apply"),
]
