"""Today's ingestion by a team's account, as the team's ingest page shows it.

Teams sit below ingestion in the data flow, so the page cannot ask ingestion itself:
ingestion registers how to read it here, in its ``ready()``, as apps register their
tables with core.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from apps.teams.models import Team


@dataclass(frozen=True)
class IngestUsage:
    """Bytes of spans accepted today (UTC) by every team of one account."""

    # None when the shared cache that counts them could not be read.
    stored_bytes: int | None
    # INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY; 0 when there is no quota.
    quota_bytes: int
    resets_at: datetime
    # The last request refused today for the quota, if any.
    last_refused_at: datetime | None = None

    @property
    def refusing(self) -> bool:
        """Whether requests are refused now: the quota is used up until ``resets_at``."""
        return self.quota_bytes > 0 and (self.stored_bytes or 0) >= self.quota_bytes

    @property
    def percent(self) -> int:
        if not self.quota_bytes or self.stored_bytes is None:
            return 0
        return min(100, self.stored_bytes * 100 // self.quota_bytes)


# How the usage is read; registered by ingestion, which keeps the counts.
_reader: Callable[[Team], IngestUsage] | None = None


def ingest_usage_reader_register(reader: Callable[[Team], IngestUsage]) -> None:
    global _reader
    _reader = reader


def ingest_usage_for_team(*, team: Team) -> IngestUsage | None:
    """The account's usage today; None when ingestion registered no reader."""
    return None if _reader is None else _reader(team)
