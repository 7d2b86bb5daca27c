from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework.views import APIView

from apps.core.api.parsers import BoundedJSONParser


# No docstring here: the schema would show it as every operation's description.
class ApiView(APIView):
    parser_classes = [BoundedJSONParser]


class ApiDocsView(SpectacularSwaggerSplitView):
    """Swagger UI from the installed sidecar package, its script a file of its own (the
    split view) and its page without the inline style drf-spectacular's template has:
    nothing the Content-Security-Policy refuses."""

    template_name = "api/docs.html"
