from rest_framework.views import APIView

from apps.core.api.parsers import BoundedJSONParser


# No docstring here: the schema would show it as every operation's description.
class ApiView(APIView):
    parser_classes = [BoundedJSONParser]
