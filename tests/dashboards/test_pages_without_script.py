"""Every page works without JavaScript and under a Content-Security-Policy with no inline
script and no eval: htmx only enhances links and forms that already work."""

import re

import pytest

from tests.builders.api import ApiWorld
from tests.conftest import client_for

PAGES = [
    "/teams/acme/dashboards/",
    "/teams/acme/dashboards/rag-chat/",
    "/teams/acme/dashboards/rag-chat/stages/retrieval/",
    "/teams/acme/dashboards/rag-chat/fit/",
    "/teams/acme/dashboards/rag-chat/whatif/",
    "/teams/acme/dashboards/rag-chat/whatif/?change=retrieval:scale:0.5",
    "/teams/acme/violations/",
    "/teams/acme/traces/",
    "/teams/acme/traces/unmatched/",
    "/teams/acme/pipelines/",
    "/teams/acme/pipelines/rag-chat/",
    "/teams/acme/config/",
    "/teams/acme/members/",
    "/teams/acme/ingest-tokens/",
    "/teams/tokens/",
    "/teams/acme/alerts/",
    "/teams/acme/alerts/channels/",
    "/teams/acme/alerts/rules/",
]


@pytest.mark.parametrize("url", PAGES)
def test_a_page_has_no_inline_script_and_every_htmx_link_is_a_link(
    api: ApiWorld,
    url: str,
) -> None:
    response = client_for(api.world.owner).get(url)
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]+)", policy)
    assert script_src
    assert script_src.group(1).strip() == "'self'"
    assert "unsafe" not in script_src.group(1)
    html = response.content.decode()
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag, tag
    for body in re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S):
        assert not body.strip(), "inline script"
    assert not re.search(r"\son[a-z]+\s*=", html), "inline event handler"
    assert "hx-on" not in html
    for element in re.findall(r"<a\b[^>]*\bhx-get=[^>]*>", html):
        href = re.search(r'\bhref="([^"]*)"', element)
        get = re.search(r'\bhx-get="([^"]*)"', element)
        assert href, element
        assert get, element
        assert href.group(1) == get.group(1), element
    for element in re.findall(r"<form\b[^>]*\bhx-(?:get|post)=[^>]*>", html):
        assert re.search(r'\baction="[^"]+"', element), element
