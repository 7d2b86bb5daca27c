from django.urls import path

from apps.dashboards.views import details

app_name = "violations"

urlpatterns = [
    path("", details.violation_list, name="list"),
    path("<int:violation_id>/", details.violation_detail, name="detail"),
]
