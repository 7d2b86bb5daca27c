"""Where `make run` keeps the demo team's ingest token for the traffic simulator."""

from pathlib import Path

from django.conf import settings


def demo_ingest_token_path() -> Path:
    """Written by ``demo_setup``, read by ``simulate_traffic`` when no token is given."""
    return Path(settings.VAR_DIR) / "demo-ingest-token"
