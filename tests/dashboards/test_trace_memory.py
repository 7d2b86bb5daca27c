"""A trace of 64 spans of about a megabyte of attributes each, cheap to send gzipped: its
page, a span's details, its API answer and one span's from the API each take the serving
process far less memory than its attributes, measured on a real gunicorn worker."""

import http.client
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.test import Client

from apps.teams.services import api_token_create
from tests.builders.ingested_traces import hex_of, ingest, make_rag_pipeline, now_ns
from tests.builders.spans import HandSpan, rag_spans, span
from tests.conftest import TeamWorld
from tests.processes import WebServer, web_server
from tests.timing import MS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    # Peak memory comes from Linux's /proc (VmHWM, reset through clear_refs).
    pytest.mark.skipif(
        not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc/<pid>/clear_refs"
    ),
]

SMALL, BIG = 0xA1, 0xBB
SPANS = 64
# 62 values of 16,000 characters (the value limit is 16,384): about 1 MiB a span, under
# the span limit of 1,048,576 characters.
VALUES, VALUE_CHARS = 62, 16_000
ATTRIBUTES_BYTES = SPANS * VALUES * VALUE_CHARS
# Loading every attribute once would take at least ATTRIBUTES_BYTES (62 MB); a request
# may grow the process by an eighth of that.
BOUND = ATTRIBUTES_BYTES // 8
FIRST_CHILD = 0x100


def heavy_trace(trace_id: int, t0: int) -> list[HandSpan]:
    """A chat request whose 63 model calls each carry a megabyte of prompt, repetitive as
    prompts are (gzip makes it a few kilobytes on the wire)."""
    prompt = ("You are a helpful assistant. " * 600)[:VALUE_CHARS]
    attributes = {f"llm.prompt.{i}": prompt for i in range(VALUES)}
    spans = [span(0x10, None, t0, t0 + 2000 * MS, name="POST /chat", kind="server",
                  attributes=attributes, trace_id=trace_id)]  # fmt: skip
    for i in range(SPANS - 1):
        start = t0 + (10 + i * 30) * MS
        spans.append(
            span(FIRST_CHILD + i, 0x10, start, start + 25 * MS, name="chat gpt-4o",
                 kind="client", attributes={"gen_ai.operation.name": "chat", **attributes},
                 events=[("first_token", start + 5 * MS)], trace_id=trace_id)
        )  # fmt: skip
    return spans


def _status(pid: int) -> dict[str, int]:
    """The process's memory figures from /proc, in bytes."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in lines)
    return {name: int(fields[name].split()[0]) * 1024 for name in ("VmRSS", "VmHWM")}


def get(server: WebServer, path: str, headers: dict[str, str]) -> int:
    """The status of a GET, its body read to the end."""
    address = urlsplit(server.url)
    connection = http.client.HTTPConnection(address.netloc, timeout=120)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def peak_growth(server: WebServer, path: str, headers: dict[str, str]) -> tuple[int, int]:
    """How far the worker's resident memory rose above where it stood while answering,
    and the answer's status."""
    before = _status(server.worker_pid)["VmRSS"]
    # 5: reset the peak resident size to the current one (proc(5), clear_refs).
    Path(f"/proc/{server.worker_pid}/clear_refs").write_text("5")
    status = get(server, path, headers)
    return _status(server.worker_pid)["VmHWM"] - before, status


def test_a_heavy_traces_page_panel_and_api_answers_hold_far_less_than_its_attributes(
    world: TeamWorld, tmp_path: Path
) -> None:
    make_rag_pipeline(world.team)
    t0 = now_ns() - 10 * 60 * 10**9
    heavy = heavy_trace(BIG, t0)
    ingest(world.team, rag_spans(SMALL, t0), *(heavy[i : i + 16] for i in range(0, SPANS, 16)))
    browser = Client()
    browser.force_login(world.viewer)
    session = {"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}
    _, token = api_token_create(user=world.viewer, name="memory")
    bearer = {"Authorization": f"Bearer {token}"}
    a_span = f"{FIRST_CHILD + 7:016x}"

    def paths(trace_id: int) -> dict[str, tuple[str, dict[str, str]]]:
        page = f"/teams/acme/traces/{hex_of(trace_id)}/"
        api = f"/api/v1/traces/{hex_of(trace_id)}/"
        span_id = a_span if trace_id == BIG else f"{0x40:016x}"
        return {
            "page": (page, session),
            "span panel": (f"{page}?span={span_id}", session | {"HX-Request": "true"}),
            "trace API": (f"{api}?team=acme", bearer),
            "span API": (f"{api}spans/{span_id}/?team=acme", bearer),
        }

    with web_server(tmp_path / "web.log") as server:
        # Each kind of request once on a small trace first: modules, templates and the
        # database connection are then loaded, and only the trace's own weight is left.
        warm = {name: get(server, path, h) for name, (path, h) in paths(SMALL).items()}
        measured = {name: peak_growth(server, path, h) for name, (path, h) in paths(BIG).items()}

    mib = {name: round(growth / 2**20, 1) for name, (growth, _) in measured.items()}
    assert all(growth < BOUND for growth, _ in measured.values()), f"peak growth in MiB: {mib}"
    statuses = {name: status for name, (_, status) in measured.items()}
    assert set(warm.values()) == set(statuses.values()) == {200}, (warm, statuses)
