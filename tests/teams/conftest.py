import pytest
from django.http.response import HttpResponseBase
from django.urls import reverse

HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True)
def _fresh_allowances(clean_cache: None) -> None:
    """Sign-up and invitation allowances are counted in the cache: no test here inherits
    another's counts."""


def assert_redirects_to_login(response: HttpResponseBase, path: str) -> None:
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={path}"
