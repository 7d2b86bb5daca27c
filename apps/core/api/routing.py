"""Several one-operation views behind one URL.

A REST resource answers GET, PATCH, PUT and DELETE at one path, while each
operation is its own APIView with its own serializers. ``operations`` routes a
request by its method; schema generators see one class holding every handler.
"""

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase
from rest_framework.views import APIView


class _MethodRouter:
    csrf_exempt = True  # as APIView.as_view(): SessionAuthentication enforces CSRF itself

    def __init__(self, views: tuple[type[APIView], ...]) -> None:
        self.handlers: dict[str, Any] = {}
        for view in views:
            for method in view.http_method_names:
                if method == "options" or method not in vars(view):
                    continue
                if method in self.handlers:
                    raise ImproperlyConfigured(f"Two views handle {method.upper()}.")
                self.handlers[method] = view.as_view()
        # Drives OPTIONS and the 405 whose Allow header names every method of the URL.
        self.cls: type[APIView] = type(f"{views[0].__name__}Operations", views, {})
        self.initkwargs: dict[str, Any] = {}
        self.fallback = self.cls.as_view()

    def __call__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        method = (request.method or "").lower()
        if method == "head":
            method = "get"
        return self.handlers.get(method, self.fallback)(request, *args, **kwargs)


def operations(*views: type[APIView]) -> _MethodRouter:
    return _MethodRouter(views)
