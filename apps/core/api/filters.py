from typing import Any

from django.db.models import Q, QuerySet
from django_filters import CharFilter, FilterSet
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request


def filter_queryset(
    *, filterset_class: type[FilterSet], request: Request, queryset: QuerySet[Any]
) -> QuerySet[Any]:
    """``queryset`` narrowed by the query string; a bad filter value is a 400 naming it."""
    filterset = filterset_class(request.query_params, queryset=queryset, request=request)
    if not filterset.is_valid():
        raise ValidationError({name: list(messages) for name, messages in filterset.errors.items()})
    return filterset.qs


class NameOrSlugFilter(FilterSet):
    search = CharFilter(method="filter_search", label="Part of the name or the slug.")

    def filter_search(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return queryset.filter(Q(name__icontains=value) | Q(slug__icontains=value))
