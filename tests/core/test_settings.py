"""Settings come from the environment; production settings pass Django's deploy checks."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from apps.core import embedded_postgres
from tests.processes import ROOT

PRODUCTION_KEY = "x7#kq2!vLr9@pWz4$Nt8^Hc3&Bm6*Yf1(Gd5)Js0-Ua2+Ee7=Io4"


def _manage(
    *args: str, tmp_path: Path, embedded: bool = False, **env_vars: str
) -> subprocess.CompletedProcess[str]:
    drop = {"DJANGO_SETTINGS_MODULE", "SECRET_KEY", "DEBUG", "SECRET_KEY_FILE"}
    if embedded:
        drop |= {"DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "EMAIL_URL"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(DJANGO_SETTINGS_MODULE="budgets_site.settings", VAR_DIR=str(tmp_path), **env_vars)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_the_deploy_check(tmp_path: Path) -> None:
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        tmp_path=tmp_path,
        DEBUG="false",
        SECRET_KEY=PRODUCTION_KEY,
        ALLOWED_HOSTS="budgets.example.com",
        SITE_URL="https://budgets.example.com",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_a_missing_secret_key_stops_production_with_a_clear_message(tmp_path: Path) -> None:
    result = _manage("check", tmp_path=tmp_path, DEBUG="false")
    assert result.returncode != 0
    assert "SECRET_KEY (or SECRET_KEY_FILE) is required when DEBUG is off" in result.stderr


def test_the_secret_key_can_come_from_a_file(tmp_path: Path) -> None:
    key_file = tmp_path / "secret"
    key_file.write_text(PRODUCTION_KEY)
    result = _manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.SECRET_KEY)",
        tmp_path=tmp_path,
        DEBUG="false",
        SECRET_KEY_FILE=str(key_file),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == PRODUCTION_KEY


def test_development_generates_a_secret_key_once_and_keeps_it(tmp_path: Path) -> None:
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    first = _manage("shell", "--no-imports", "-c", code, tmp_path=tmp_path, DEBUG="true")
    second = _manage("shell", "--no-imports", "-c", code, tmp_path=tmp_path, DEBUG="true")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == second.stdout.strip() == (tmp_path / "secret_key").read_text()
    assert len(first.stdout.strip()) >= 50


def test_embedded_defaults_are_a_private_postgres_and_a_broker_without_server(
    tmp_path: Path,
) -> None:
    code = (
        "from django.conf import settings; db = settings.DATABASES['default']; "
        "print(db['ENGINE']); print(db['HOST']); print(settings.CELERY_BROKER_URL); "
        "print(settings.CACHES['default']['BACKEND']); print(settings.EMAIL_BACKEND); "
        "print(settings.EMAIL_FILE_PATH)"
    )
    result = _manage(
        "shell", "--no-imports", "-c", code, tmp_path=tmp_path, embedded=True, DEBUG="true"
    )
    lines = result.stdout.split()
    assert lines[0] == "django.db.backends.postgresql"
    assert lines[1] == str(embedded_postgres.server_at(var_dir=tmp_path).socket_dir)
    assert lines[2] == "filesystem://localhost/"
    assert lines[3].endswith("LocMemCache")
    # A line in the log per message, the whole message in a file under var/mail/.
    assert lines[4] == "apps.core.mail_backends.OneLineEmailBackend"
    assert lines[5] == str(tmp_path / "mail")
    # The settings name the embedded server; only `make db` starts one.
    assert not (tmp_path / "postgres").exists()


@pytest.mark.parametrize(("level", "requests_shown"), [("INFO", True), ("WARNING", False)])
def test_the_development_servers_line_per_request_follows_request_log_level(
    tmp_path: Path, level: str, requests_shown: bool
) -> None:
    code = (
        "import logging; log = logging.getLogger('django.server'); "
        "log.info('GET /ok 200'); log.warning('GET /missing 404')"
    )
    result = _manage(
        "shell", "--no-imports", "-c", code, tmp_path=tmp_path, DEBUG="true",
        REQUEST_LOG_LEVEL=level,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert ("INFO django.server GET /ok 200" in result.stderr) is requests_shown
    assert result.stderr.count("GET /ok 200") == int(requests_shown)
    # Failed requests show whatever the level, once, in the format of every other line.
    assert "WARNING django.server GET /missing 404" in result.stderr
    assert result.stderr.count("GET /missing 404") == 1


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TRACE_IDLE_SECONDS", "-1", "TRACE_IDLE_SECONDS must be at least 0; it is -1."),
        ("TRACE_SETTLE_SECONDS", "-0.5", "TRACE_SETTLE_SECONDS must be at least 0; it is -0.5."),
        ("SPAN_RETENTION_DAYS", "0", "SPAN_RETENTION_DAYS must be at least 1; it is 0."),
        ("INGEST_MAX_BODY_BYTES", "0", "INGEST_MAX_BODY_BYTES must be at least 1; it is 0."),
        ("INGEST_DRAIN_CONCURRENCY", "0", "INGEST_DRAIN_CONCURRENCY must be at least 1; it is 0."),
        ("INGEST_RATE_LIMIT_SPANS", "-5", "INGEST_RATE_LIMIT_SPANS must be at least 0; it is -5."),
        ("RECOMPUTE_MAX_HOURS", "0", "RECOMPUTE_MAX_HOURS must be at least 1; it is 0."),
        (
            "RECOMPUTE_MAX_HOURS",
            "200",
            "RECOMPUTE_MAX_HOURS (200) reaches past the spans kept (SPAN_RETENTION_DAYS=7, "
            "168 hours)",
        ),
        (
            "WEBHOOK_ALLOWED_HOSTS",
            "https://ok.internal:443,alertmanager.internal",
            "WEBHOOK_ALLOWED_HOSTS: “alertmanager.internal” is a bare host: write the scheme, "
            "host and port a webhook may reach, such as https://alertmanager.internal:443",
        ),
        (
            "CONFIG_SECRET_ENV_PREFIXES",
            "LB_OK_,acme=1BAD",
            "CONFIG_SECRET_ENV_PREFIXES: “acme=1BAD” does not start variable names",
        ),
    ],
)
def test_an_out_of_range_setting_stops_the_process_with_its_name(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    result = _manage("check", tmp_path=tmp_path, embedded=True, DEBUG="true", **{name: value})
    assert result.returncode != 0
    assert message in result.stderr


def test_settings_at_their_least_values_are_accepted(tmp_path: Path) -> None:
    result = _manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings as s; "
        "print(s.TRACE_SETTLE_SECONDS, s.INGEST_RATE_LIMIT_SPANS, s.SPAN_RETENTION_DAYS)",
        tmp_path=tmp_path,
        embedded=True,
        DEBUG="true",
        TRACE_SETTLE_SECONDS="0",
        INGEST_RATE_LIMIT_SPANS="0",
        SPAN_RETENTION_DAYS="1",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0.0", "0", "1"]


@pytest.mark.parametrize("url", ["sqlite:///var/db.sqlite3", "mysql://user:pw@db.example.com/x"])
def test_a_database_other_than_postgresql_is_refused_with_a_clear_message(
    tmp_path: Path, url: str
) -> None:
    result = _manage("check", tmp_path=tmp_path, DEBUG="true", DATABASE_URL=url)
    assert result.returncode != 0
    assert "DATABASE_URL must name a PostgreSQL database" in result.stderr
    assert "Leave it unset to use the embedded PostgreSQL server" in result.stderr


PRODUCTION = {"DEBUG": "false", "SECRET_KEY": PRODUCTION_KEY}
SHOW = "from django.conf import settings; print(settings.{})"


def _production(tmp_path: Path, code: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by production settings in this environment, with ``env_vars`` set; one
    given as an empty string is left out."""
    env = {k: v for k, v in os.environ.items() if k.removesuffix("_FILE") not in env_vars}
    env.update(DJANGO_SETTINGS_MODULE="budgets_site.settings", VAR_DIR=str(tmp_path), **PRODUCTION)
    env.update({name: value for name, value in env_vars.items() if value})
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_production_without_a_mail_server_stops_unless_the_console_is_named(
    tmp_path: Path,
) -> None:
    missing = _production(tmp_path, SHOW.format("EMAIL_BACKEND"), EMAIL_URL="")
    named = _production(tmp_path, SHOW.format("EMAIL_BACKEND"), EMAIL_URL="consolemail://")

    assert missing.returncode != 0
    assert "EMAIL_URL is required when DEBUG is off" in missing.stderr
    assert named.returncode == 0, named.stderr
    assert named.stdout.strip() == "django.core.mail.backends.console.EmailBackend"


def test_production_must_say_how_many_proxies_are_in_front(tmp_path: Path) -> None:
    missing = _production(tmp_path, SHOW.format("CLIENT_IP_PROXY_COUNT"), CLIENT_IP_PROXY_COUNT="")
    said = _production(tmp_path, SHOW.format("CLIENT_IP_PROXY_COUNT"), CLIENT_IP_PROXY_COUNT="1")

    assert missing.returncode != 0
    assert "CLIENT_IP_PROXY_COUNT is required when DEBUG is off" in missing.stderr
    assert said.stdout.strip() == "1"


def test_x_forwarded_proto_is_trusted_only_when_the_operator_says_so(tmp_path: Path) -> None:
    default = _production(tmp_path, SHOW.format("SECURE_PROXY_SSL_HEADER"))
    behind = _production(
        tmp_path, SHOW.format("SECURE_PROXY_SSL_HEADER"), USE_X_FORWARDED_PROTO="true"
    )

    assert default.stdout.strip() == "None"
    assert behind.stdout.strip() == "('HTTP_X_FORWARDED_PROTO', 'https')"


def test_a_retired_setting_stops_start_up_with_its_replacement(tmp_path: Path) -> None:
    result = _production(tmp_path, SHOW.format("DEBUG"), WHATIF_RUNS_PER_TEAM="4")

    assert result.returncode != 0
    assert "WHATIF_RUNS_PER_TEAM is no longer read" in result.stderr
    assert "WHATIF_RUNS_PER_ACCOUNT" in result.stderr


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("INGEST_TOKENS_PER_TEAM", "INGEST_TOKENS_PER_ACCOUNT"),
        ("INGEST_MAX_BACKLOG_SPANS_PER_TEAM", "INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT"),
    ],
)
def test_a_cap_now_counted_per_account_stops_the_process_under_its_old_name(
    tmp_path: Path, old: str, new: str
) -> None:
    result = _manage("check", tmp_path=tmp_path, embedded=True, DEBUG="true", **{old: "5"})
    assert result.returncode != 0
    assert f"{old} is no longer read: it is now {new}" in result.stderr
