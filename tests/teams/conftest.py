from django.http.response import HttpResponseBase
from django.urls import reverse

HTMX = {"HX-Request": "true"}


def assert_redirects_to_login(response: HttpResponseBase, path: str) -> None:
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={path}"
