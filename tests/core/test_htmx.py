"""render_page: the whole page, or one named partial of it when htmx asks."""

from typing import Any, cast

import pytest
from django.http import HttpResponse
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from apps.core import htmx
from apps.core.htmx import HtmxHttpRequest, render_page

PAGE = "app/page.html"


@pytest.fixture
def rendered(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """The template names and contexts render_page hands to Django, in order."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def render(request: Any, template: str, context: dict[str, Any], status: int) -> HttpResponse:
        calls.append((template, context))
        return HttpResponse(status=status)

    monkeypatch.setattr(htmx, "render", render)
    return calls


def request_for(*, from_htmx: bool, restoring_history: bool = False) -> HtmxHttpRequest:
    headers = {"HX-Request": "true"} if from_htmx else {}
    if restoring_history:
        headers["HX-History-Restore-Request"] = "true"
    request = RequestFactory().get("/", headers=headers)
    request.htmx = HtmxDetails(request)  # type: ignore[attr-defined]
    return cast(HtmxHttpRequest, request)


@pytest.mark.parametrize("from_htmx", [False, True])
def test_without_a_partial_every_request_gets_the_whole_page(rendered: list, from_htmx: bool):
    response = render_page(request_for(from_htmx=from_htmx), PAGE, {"a": 1}, status=422)

    assert rendered == [(PAGE, {"a": 1})]
    assert response.status_code == 422
    assert not response.has_header("Vary")


def test_htmx_gets_the_named_partial(rendered: list):
    response = render_page(request_for(from_htmx=True), PAGE, {"a": 1}, partial="table")

    assert rendered == [(f"{PAGE}#table", {"a": 1})]
    assert response["Vary"] == "HX-Request"


def test_a_plain_request_gets_the_page_the_partial_belongs_to(rendered: list):
    response = render_page(request_for(from_htmx=False), PAGE, {"a": 1}, partial="table")

    assert rendered == [(PAGE, {"a": 1})]
    assert response["Vary"] == "HX-Request"


def test_a_partial_without_a_page_of_its_own_is_shown_on_the_given_page(rendered: list):
    render_page(request_for(from_htmx=False), PAGE, {"a": 1}, partial="form", page="app/alone.html")
    render_page(request_for(from_htmx=True), PAGE, {"a": 1}, partial="form", page="app/alone.html")

    assert rendered == [
        ("app/alone.html", {"a": 1, "partial": f"{PAGE}#form"}),
        (f"{PAGE}#form", {"a": 1}),
    ]


def test_a_history_restore_gets_the_whole_page(rendered: list):
    request = request_for(from_htmx=True, restoring_history=True)
    response = render_page(request, PAGE, {"a": 1}, partial="table")

    assert rendered == [(PAGE, {"a": 1})]
    assert response["Vary"] == "HX-Request"
