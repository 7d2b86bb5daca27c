import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core import embedded_postgres
from apps.demo.management.commands.demo_setup import (
    DEMO_PASSWORD,
    DEMO_TEAM,
    DEMO_USERNAME,
)

RULE = "  " + "=" * 76


class Command(BaseCommand):
    help = (
        "Wait until the web server answers /readyz, then print where the demo is, how to "
        "sign in, where the logs go and how to stop (`make run` starts it beside honcho)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default=settings.SITE_URL, help="Base URL of the server.")
        parser.add_argument(
            "--wait",
            type=float,
            default=120.0,
            help="Seconds to wait for the server to be ready (default: 120).",
        )

    def handle(self, *args: Any, url: str, wait: float, **options: Any) -> None:
        url = url.rstrip("/")
        if urlsplit(url).scheme not in ("http", "https"):
            raise CommandError(f"--url must be an http:// or https:// URL, not “{url}”.")
        if not _wait_until_ready(url, timeout=wait):
            raise CommandError(f"No answer from {url}/readyz within {wait:g} s: see above.")
        lines = banner_lines(url=url, postgres_log=_embedded_server_log())
        # One write, so that the lines of the other processes do not cut through it.
        self.stdout.write("\n".join(["", RULE, *lines, RULE, ""]))
        self.stdout.flush()


def banner_lines(*, url: str, postgres_log: Path | None) -> list[str]:
    """What a newcomer needs once everything is up, in plain text; ``postgres_log`` is the
    embedded server's log, None when DATABASE_URL names the database."""
    lines = [
        "  Latency Budgets is running.",
        "",
        f"    Open      {url}/",
        f'    Sign in   user "{DEMO_USERNAME}", password "{DEMO_PASSWORD}" '
        f'(team "{DEMO_TEAM}", with live demo traffic)',
        "    Logs      here, each line prefixed by its process (web, worker, scheduler, traffic)",
    ]
    quiet = [name for name, level in _log_levels() if level > logging.INFO]
    if quiet:
        lines += [
            "              routine task and request lines are left out, warnings and errors show",
            f"              (make run {' '.join(f'{name}=INFO' for name in quiet)} shows them all)",
        ]
    if postgres_log is not None:
        lines.append(f"              PostgreSQL logs to {_shown(postgres_log)}")
    stop = "Ctrl-C stops everything"
    if postgres_log is not None:
        stop += ", the embedded PostgreSQL server too"
    lines.append(f"    Stop      {stop}")
    return lines


def _embedded_server_log() -> Path | None:
    server = embedded_postgres.server_at(var_dir=Path(settings.VAR_DIR))
    if settings.DATABASES["default"].get("HOST") != str(server.socket_dir):
        return None
    return server.log


def _log_levels() -> list[tuple[str, int]]:
    # The worker's level is an option of the celery command, not a setting: `make run`
    # passes it in the environment of every process, this one included.
    worker = logging.getLevelName(os.environ.get("WORKER_LOG_LEVEL", "WARNING").upper())
    return [
        ("WORKER_LOG_LEVEL", worker if isinstance(worker, int) else logging.NOTSET),
        ("REQUEST_LOG_LEVEL", logging.getLogger("django.server").getEffectiveLevel()),
    ]


def _shown(path: Path) -> str:
    """A path under the current directory as typed from there, any other in full."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _wait_until_ready(url: str, *, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            # The scheme was checked above.
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)
