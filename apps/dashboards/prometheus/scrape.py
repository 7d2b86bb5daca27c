"""The body of a scrape: a team's figures rendered in the format Prometheus asked for,
gzipped, computed once per team and format for ``METRICS_CACHE_SECONDS``.

Prometheus asks for OpenMetrics first and the classic text format next; anything
else (curl, a browser) gets the classic text. The body is kept gzipped, as
Prometheus accepts it: a tenth of the bytes in the cache and on the wire.
"""

import gzip
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from apps.core.cached import cached_once
from apps.dashboards.prometheus.exposition import Family, render_openmetrics, render_text
from apps.dashboards.prometheus.families import team_families
from apps.dashboards.selectors.metrics import team_metrics
from apps.teams.models import Team

# Requests missing the cache while another computes the same body wait this long for
# it; about what one computation may take under the statement timeout.
COMPUTE_WAIT_S = 10.0


@dataclass(frozen=True)
class Format:
    name: str
    content_type: str
    render: Callable[[list[Family]], bytes]


TEXT = Format("text", "text/plain; version=0.0.4; charset=utf-8", render_text)
OPENMETRICS = Format(
    "openmetrics", "application/openmetrics-text; version=1.0.0; charset=utf-8", render_openmetrics
)


def _quality(media_range: str) -> tuple[str, float]:
    kind, *params = (part.strip() for part in media_range.split(";"))
    quality = 1.0
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                quality = float(value)
            except ValueError:
                quality = 0.0
    return kind.lower(), quality


def negotiated_format(accept: str) -> Format:
    """OpenMetrics when the Accept header prefers it to plain text, else the text format."""
    openmetrics_q = text_q = 0.0
    for media_range in accept.split(",")[:32]:
        kind, quality = _quality(media_range)
        if kind == "application/openmetrics-text":
            openmetrics_q = max(openmetrics_q, quality)
        elif kind in ("text/plain", "text/*", "*/*"):
            text_q = max(text_q, quality)
    return OPENMETRICS if openmetrics_q > text_q else TEXT


def scrape_body(*, team: Team, format: Format) -> bytes:
    """The gzipped exposition of the team's figures, shared by scrapes for a while."""

    def compute() -> bytes:
        body = format.render(team_families(team_metrics(team=team)))
        return gzip.compress(body, compresslevel=6)

    seconds = settings.METRICS_CACHE_SECONDS
    if not seconds:
        return compute()
    return cached_once(
        f"metrics:scrape:{team.pk}:{format.name}",
        seconds=seconds,
        compute=compute,
        wait_s=COMPUTE_WAIT_S,
    )
