from django.urls import path

from apps.pipelines import views

app_name = "pipelines"

urlpatterns = [
    path("", views.pipeline_list, name="list"),
]
