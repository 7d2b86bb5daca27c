"""One duration format on every page of a populated pipeline: no "1331.469 ms" beside
"1.62 s". Simulated traffic with figures of every length goes through ingest, analysis
and rollups; each page is scanned for a duration written any other way than
``format_ms`` writes it."""

import re
from dataclasses import dataclass
from datetime import timedelta
from html import unescape

import pytest
from django.db.models import F
from django.utils import timezone

from apps.ingest.models import Trace
from apps.rollups.models import Violation
from apps.rollups.services.bucket_pass import rollups_process_dirty
from tests.builders.demo_traffic import rag_pipeline, send_traffic
from tests.conftest import TeamWorld, client_for
from tests.whatif.conftest import eager  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)

# A figure in ms with two decimals or more ("1331.469 ms"), a second or more written in ms
# ("1331 ms", "1,331 ms"), seconds with three decimals or more, or a bare "0.0 ms".
MS_WITH_DECIMALS = re.compile(r"(?<![\d.,])\d[\d,]*\.\d{2,}\s?ms\b")
SECONDS_IN_MS = re.compile(r"(?<![\d.,])(?:\d{4,}|\d{1,3}(?:,\d{3})+)(?:\.\d+)?\s?ms\b")
SECONDS_WITH_DECIMALS = re.compile(r"(?<![\d.,])\d+\.\d{3,}\s?s\b")
TRAILING_ZERO = re.compile(r"(?<![\d.])\d+\.0\s?(?:ms|s)\b")


def visible(html: str) -> str:
    """What a reader sees: the text and the tooltips (titles, labels), without scripts."""
    html = re.sub(r"<script\b.*?</script>", " ", html, flags=re.S)
    tooltips = " ".join(re.findall(r'(?:title|aria-label)="([^"]*)"', html))
    return unescape(re.sub(r"<[^>]+>", " ", html) + " " + tooltips)


def misformatted(html: str) -> set[str]:
    text = visible(html)
    patterns = (MS_WITH_DECIMALS, SECONDS_IN_MS, SECONDS_WITH_DECIMALS, TRAILING_ZERO)
    return {m.group() for pattern in patterns for m in pattern.finditer(text)}


def test_the_scan_finds_what_it_looks_for() -> None:
    html = (
        '<td>1331.469 ms</td><td title="retrieval: 145.25 ms">1.62 s</td><p>1,331 ms</p>'
        "<span>2.125 s</span><span>12.0 ms</span><span>850 ms</span><span>1.5 s</span>"
    )
    assert misformatted(html) == {
        "1331.469 ms", "145.25 ms", "1,331 ms", "2.125 s", "12.0 ms"
    }  # fmt: skip
    assert misformatted("<td>145.2 ms</td><td>12 ms</td><td>1.62 s</td><td>59.9 s</td>") == set()


@dataclass
class Populated:
    world: TeamWorld
    trace_hexes: list[str]
    violation: Violation


@pytest.fixture
def populated(world: TeamWorld) -> Populated:
    pipeline = rag_pipeline(world.team)
    send_traffic(world.team, traces=300, seed=7)
    while rollups_process_dirty().buckets:
        pass
    now = timezone.now()
    violation = Violation.objects.create(
        team=world.team, pipeline=pipeline, stage=pipeline.stages.get(slug="retrieval"),
        percentile="p95", budget_ms=350, window_s=300, observed_ms=1331.469, peak_ms=1622.0183,
        sample_count=57, opened_at=now - timedelta(minutes=3), last_evaluated_at=now,
    )  # fmt: skip
    Violation.objects.create(
        team=world.team, pipeline=pipeline, stage=None, percentile="p95", budget_ms=2500,
        window_s=300, observed_ms=2412.4567, peak_ms=2999.999, sample_count=80,
        opened_at=now - timedelta(hours=2), last_evaluated_at=now - timedelta(hours=1),
        closed_at=now - timedelta(hours=1),
    )  # fmt: skip
    traces = Trace.objects.filter(team=world.team, pipeline=pipeline).order_by(
        (F("end_ns") - F("start_ns")).desc()
    )
    hexes = [bytes(t.trace_id).hex() for t in traces[:3]]
    return Populated(world, hexes, violation)


def test_every_page_of_a_populated_pipeline_writes_durations_one_way(
    populated: Populated,
    eager: None,  # noqa: F811 - the fixture
) -> None:
    client = client_for(populated.world.viewer)
    slowest = populated.trace_hexes[0]
    pages = [
        "/teams/acme/dashboards/",
        "/teams/acme/dashboards/rag-chat/?window=1h",
        "/teams/acme/dashboards/rag-chat/?window=1h&percentile=p99",
        "/teams/acme/dashboards/rag-chat/stages/retrieval/?window=1h",
        "/teams/acme/dashboards/rag-chat/stages/generation/?window=1h",
        "/teams/acme/dashboards/rag-chat/fit/?window=1h",
        "/teams/acme/pipelines/",
        "/teams/acme/pipelines/rag-chat/",
        "/teams/acme/traces/",
        "/teams/acme/traces/unmatched/",
        *(f"/teams/acme/traces/{trace_hex}/" for trace_hex in populated.trace_hexes),
        "/teams/acme/violations/",
        f"/teams/acme/violations/{populated.violation.pk}/",
        "/teams/acme/dashboards/rag-chat/whatif/?window=1h&p=p95",
        "/teams/acme/dashboards/rag-chat/whatif/?window=1h&p=p95&change=rerank:remove"
        "&change=generation:scale:0.83&change=retrieval:shift:-37.5",
    ]
    seen: dict[str, str] = {}
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        seen[url] = response.content.decode()
    # A span's details: each span of the slowest trace, the panel the span links open.
    trace_page = seen[f"/teams/acme/traces/{slowest}/"]
    for span_id in re.findall(r'data-span="([0-9a-f]{16})"', trace_page)[:12]:
        url = f"/teams/acme/traces/{slowest}/?span={span_id}"
        seen[url] = client.get(url).content.decode()

    # The pages hold durations of every length, so the scan has something to read...
    everything = " ".join(visible(html) for html in seen.values())
    assert re.search(r"\d\.\d ms", everything)  # below a second, with a decimal
    assert re.search(r"\d\.\d\d? s\b", everything)  # above, in seconds
    assert "1.33 s" in visible(seen[f"/teams/acme/violations/{populated.violation.pk}/"])
    # ... and none is written another way.
    problems = {url: found for url, html in seen.items() if (found := misformatted(html))}
    assert problems == {}
