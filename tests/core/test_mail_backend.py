"""Mail in development: one line in the log per message, the whole message in a file;
naming the console (or a server) in EMAIL_URL, and the tests' own settings, unchanged."""

import email
import io
import os
import subprocess
import sys
from email import policy
from pathlib import Path
from typing import Any

import pytest
from django.core.mail import EmailMultiAlternatives, get_connection

from apps.core import mail_backends
from tests.core.test_settings import _manage
from tests.processes import ROOT

BACKEND = "apps.core.mail_backends.OneLineEmailBackend"
HTML = "<!DOCTYPE html><html><body><h1>Retrieval over budget</h1><p>p95 812.4 ms</p></body></html>"


def alert_mail(connection: Any, to: list[str]) -> EmailMultiAlternatives:
    """An alert as the e-mail channel sends it: a text part, an HTML part, a long subject."""
    message = EmailMultiAlternatives(
        "[CRITICAL] rag-chat · stage retrieval p95 812.4 ms > 500 ms budget",
        "rag-chat stage retrieval p95 was 812.4 ms over the last 5 min.\n"
        "Dashboard: http://127.0.0.1:8000/teams/demo/dashboards/rag-chat/\n",
        "Latency Budgets <budgets@localhost>",
        to,
        connection=connection,
    )
    message.attach_alternative(HTML, "text/html")
    return message


def test_each_message_is_one_line_in_the_log_and_whole_in_its_file(tmp_path: Path) -> None:
    log = io.StringIO()
    connection = get_connection(BACKEND, file_path=str(tmp_path / "mail"), stream=log)

    sent = connection.send_messages(
        [alert_mail(connection, ["oncall@example.com", "lead@example.com"]),
         alert_mail(connection, ["oncall@example.com"])]
    )  # fmt: skip

    assert sent == 2
    lines = log.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        'Mail to oncall@example.com, lead@example.com: "[CRITICAL] rag-chat · stage retrieval '
        'p95 812.4 ms > 500 ms budget" (whole message: '
    )
    assert "<html" not in log.getvalue().lower()
    files = sorted((tmp_path / "mail").glob("*.eml"))
    assert len(files) == 2
    assert lines[0].endswith(f"{files[0]})")
    parsed = email.message_from_bytes(files[0].read_bytes(), policy=policy.default)
    assert parsed["To"] == "oncall@example.com, lead@example.com"
    html = parsed.get_body(preferencelist=("html",))
    text = parsed.get_body(preferencelist=("plain",))
    assert html is not None
    assert text is not None
    assert "<h1>Retrieval over budget</h1>" in html.get_content()
    assert "http://127.0.0.1:8000/teams/demo/dashboards/rag-chat/" in text.get_content()


def test_only_the_newest_files_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mail_backends, "KEEP", 3)
    log = io.StringIO()
    connection = get_connection(BACKEND, file_path=str(tmp_path), stream=log)
    for number in range(5):
        message = alert_mail(connection, [f"n{number}@example.com"])
        connection.send_messages([message])
    files = sorted(tmp_path.glob("*.eml"))
    assert len(files) == 3
    assert [email.message_from_bytes(f.read_bytes())["To"] for f in files] == [
        "n2@example.com", "n3@example.com", "n4@example.com"
    ]  # fmt: skip
    assert len(log.getvalue().splitlines()) == 5


def test_an_unwritable_directory_fails_loudly_unless_asked_not_to(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    loud = get_connection(BACKEND, file_path=str(blocked), stream=io.StringIO())
    with pytest.raises(FileExistsError):
        loud.send_messages([alert_mail(loud, ["a@example.com"])])
    quiet = get_connection(
        BACKEND, file_path=str(blocked), stream=io.StringIO(), fail_silently=True
    )
    assert quiet.send_messages([alert_mail(quiet, ["a@example.com"])]) == 0


@pytest.mark.parametrize(
    ("env", "backend"),
    [
        ({"DEBUG": "true"}, BACKEND),
        ({"DEBUG": "true", "EMAIL_URL": "consolemail://"}, "console.EmailBackend"),
        ({"DEBUG": "true", "EMAIL_URL": "smtp://mail.example.com:25"}, "smtp.EmailBackend"),
    ],
)
def test_the_one_line_log_is_the_development_default_only(
    tmp_path: Path, env: dict[str, str], backend: str
) -> None:
    result = _manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.EMAIL_BACKEND)",
        tmp_path=tmp_path,
        embedded=True,
        **env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(backend)


def test_the_tests_settings_keep_their_mail_as_it_was(tmp_path: Path) -> None:
    """The tests' settings name the console (pytest-django then swaps in its outbox)."""
    env = {k: v for k, v in os.environ.items() if k not in ("EMAIL_URL", "DEBUG")}
    env.update(DJANGO_SETTINGS_MODULE="budgets_site.settings_test", VAR_DIR=str(tmp_path))
    code = "from django.conf import settings; print(settings.EMAIL_BACKEND)"
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "django.core.mail.backends.console.EmailBackend"
