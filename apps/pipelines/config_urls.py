from django.urls import path

from apps.pipelines import config_views

app_name = "config"

urlpatterns = [
    path("", config_views.config_page, name="page"),
]
