"""The banner `make run` prints once the web server is ready."""

import io
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.demo.management.commands.demo_banner import banner_lines


@contextmanager
def web_server(*, readyz_status: int) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(readyz_status if self.path == "/readyz" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def request_log_level(level: int) -> Iterator[None]:
    logger = logging.getLogger("django.server")
    previous = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(previous)


def test_the_banner_waits_for_readyz_then_names_the_address_and_the_demo_sign_in() -> None:
    out = io.StringIO()
    with web_server(readyz_status=200) as url:
        call_command("demo_banner", url=url + "/", wait=5, stdout=out)
    text = out.getvalue()
    assert "Latency Budgets is running." in text
    assert f"Open      {url}/\n" in text
    assert 'user "demo", password "demo-budgets" (team "demo"' in text
    assert "Ctrl-C stops everything" in text


def test_no_banner_while_the_server_is_not_ready() -> None:
    out = io.StringIO()
    with web_server(readyz_status=503) as url, pytest.raises(CommandError, match="readyz"):
        call_command("demo_banner", url=url, wait=0.6, stdout=out)
    assert out.getvalue() == ""


def test_quiet_levels_say_how_to_see_every_task_and_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WORKER_LOG_LEVEL", "warning")
    log = tmp_path / "postgres" / "server.log"
    with request_log_level(logging.WARNING):
        text = "\n".join(banner_lines(url="http://127.0.0.1:8000", postgres_log=log))
    assert "make run WORKER_LOG_LEVEL=INFO REQUEST_LOG_LEVEL=INFO shows them all" in text
    assert f"PostgreSQL logs to {log}" in text
    assert "Ctrl-C stops everything, the embedded PostgreSQL server too" in text


def test_at_info_there_is_nothing_to_turn_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_LOG_LEVEL", "INFO")
    with request_log_level(logging.INFO):
        text = "\n".join(banner_lines(url="http://127.0.0.1:8000", postgres_log=None))
    assert "left out" not in text
    assert "make run" not in text


def test_with_a_database_url_nothing_embedded_is_mentioned() -> None:
    lines = banner_lines(url="http://127.0.0.1:8000", postgres_log=None)
    assert not any("PostgreSQL" in line for line in lines)
    assert lines[-1].endswith("Ctrl-C stops everything")
