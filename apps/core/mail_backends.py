"""Mail in development: one line in the log per message, the whole message in a file.

Django's console backend prints every message whole, HTML part included, into the log
that `make run` keeps quiet; this one prints who it is for and its subject, and keeps the
message itself under ``EMAIL_FILE_PATH`` (``var/mail/``), one ``.eml`` file each, which any
mail client opens. Only the newest ``KEEP`` files stay, so a long demo cannot fill a disk.
"""

import itertools
import os
import sys
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend

KEEP = 500
_numbers = itertools.count(1)


class OneLineEmailBackend(BaseEmailBackend):
    def __init__(
        self,
        *args: Any,
        file_path: str | None = None,
        stream: TextIO | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.directory = Path(file_path or settings.EMAIL_FILE_PATH)
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        sent = 0
        with self._lock:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                for message in email_messages:
                    path = self._write(message)
                    self.stream.write(f"{_line(message, path)}\n")
                    self.stream.flush()
                    sent += 1
                _prune(self.directory)
            except OSError:
                if not self.fail_silently:
                    raise
        return sent

    def _write(self, message: EmailMessage) -> Path:
        # Sortable by time, and unique across the processes that share the directory.
        name = f"{datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}-{next(_numbers):04d}.eml"
        path = self.directory / name
        path.write_bytes(message.message().as_bytes())
        return path


def _line(message: EmailMessage, path: Path) -> str:
    subject = " ".join(str(message.subject).split())
    return f'Mail to {", ".join(message.recipients())}: "{subject}" (whole message: {_shown(path)})'


def _shown(path: Path) -> str:
    """The file as the reader of the log finds it: relative to the checkout when inside."""
    try:
        return str(path.resolve().relative_to(Path(settings.BASE_DIR).resolve()))
    except ValueError:
        return str(path)


def _prune(directory: Path) -> None:
    files = sorted(directory.glob("*.eml"))
    for old in files[: max(0, len(files) - KEEP)]:
        old.unlink(missing_ok=True)
