"""A webhook URL as those who may not change its channel see it.

Slack's incoming webhooks, and many others, carry their token in the path or query: the
URL is the secret. Viewers get its scheme, host and port only, on the channel pages, in
the API and in the configuration file alike.
"""

from urllib.parse import urlsplit

HIDDEN = "…"


def url_for_viewers(url: str) -> str:
    """``url`` without its path, query and credentials (``https://hooks.slack.com/…``)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return HIDDEN
    if not parts.scheme or not parts.hostname:
        return HIDDEN
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    host = host if port is None else f"{host}:{port}"
    hidden = parts.path not in ("", "/") or parts.query or parts.fragment or parts.username
    return f"{parts.scheme}://{host}/{HIDDEN}" if hidden else f"{parts.scheme}://{host}/"


def url_is_hidden(url: str) -> bool:
    """``url`` is a viewer's form with its path left out: it cannot be sent to."""
    return url == HIDDEN or url.endswith("/" + HIDDEN)


def url_as_written(*, written: str, stored: str) -> str:
    """The URL a file means: the stored one when the file holds the stored URL's viewer's
    form (a viewer's export applied back), else what it says."""
    return stored if stored and written == url_for_viewers(stored) else written
