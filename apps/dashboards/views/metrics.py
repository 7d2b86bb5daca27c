"""``GET /metrics``: a team's figures for Prometheus (docs/metrics.md).

A plain Django view answering in text, as scrapers expect: the body, or a status
with one line saying why (Prometheus shows the status on its targets page and sets
``up`` to 0). Statements cut short by the web's statement timeout answer 503 with
``Retry-After`` in text too, rather than the HTML page.
"""

import gzip

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from apps.core.statement_timeout import RETRY_AFTER_S, is_statement_timeout
from apps.dashboards.prometheus.access import (
    SCHEME,
    ScrapeRefused,
    metrics_token_for_request,
    scrape_allowance_take,
)
from apps.dashboards.prometheus.scrape import negotiated_format, scrape_body

PLAIN = "text/plain; charset=utf-8"


def _refusal(refused: ScrapeRefused) -> HttpResponse:
    response = HttpResponse(refused.message + "\n", status=refused.status, content_type=PLAIN)
    if refused.status == 401:
        response["WWW-Authenticate"] = f'{SCHEME} realm="metrics"'
    if refused.retry_after_s:
        response["Retry-After"] = str(refused.retry_after_s)
    return response


def _accepts_gzip(request: HttpRequest) -> bool:
    accepted = request.headers.get("Accept-Encoding", "")
    return any(part.split(";")[0].strip().lower() == "gzip" for part in accepted.split(","))


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    try:
        token = metrics_token_for_request(request)
        scrape_allowance_take(token=token)
        chosen = negotiated_format(request.headers.get("Accept", ""))
        body = scrape_body(team=token.team, format=chosen)
    except ScrapeRefused as refused:
        return _refusal(refused)
    except OperationalError as exc:
        if not is_statement_timeout(exc):
            raise
        return _refusal(
            ScrapeRefused(
                503,
                "The figures took too long to read; the next scrape tries again.",
                RETRY_AFTER_S,
            )
        )
    if _accepts_gzip(request):
        response = HttpResponse(body, content_type=chosen.content_type)
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(gzip.decompress(body), content_type=chosen.content_type)
    patch_vary_headers(response, ["Accept", "Accept-Encoding"])
    return response
