from collections.abc import Callable, Sequence
from typing import Any

from django.db.models import QuerySet
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView


class DefaultPagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


def paginated_response(
    *,
    request: Request,
    view: APIView,
    queryset: QuerySet[Any] | Sequence[Any],
    serializer_class: type[BaseSerializer[Any]],
    rows: Callable[[list[Any]], Sequence[Any]] | None = None,
) -> Response:
    """One page of ``queryset`` as ``{count, next, previous, results}``; ``rows`` turns
    the page's objects into what the serializer reads, when they are not that already."""
    pagination_class = getattr(view, "pagination_class", None) or DefaultPagination
    paginator = pagination_class()
    page = list(paginator.paginate_queryset(queryset, request, view=view) or [])
    items = rows(page) if rows is not None else page
    return paginator.get_paginated_response(serializer_class(items, many=True).data)
