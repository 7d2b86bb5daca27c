from django.urls import path

from apps.runtime.apis.documents import RuntimeDocumentApi

# At the site root beside /v1/traces, for the same client. Any string reaches the view,
# so an unknown slug gets the API's JSON 404 and not the site's page.
urlpatterns = [
    path("v1/budgets/<str:pipeline_slug>", RuntimeDocumentApi.as_view(), name="runtime-document"),
]
