"""The embedded broker never hands a worker a message that is still being written."""

from pathlib import Path

import pytest
from kombu import Connection
from kombu.transport.virtual import Empty

from apps.core.filesystem_broker import Channel, Transport


def _connection(folder: Path) -> Connection:
    return Connection(
        "filesystem://localhost/",
        transport=Transport,
        transport_options={
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "processed_folder": str(folder),
            "control_folder": str(folder / "control"),
            "store_processed": False,
        },
    )


def test_a_message_is_put_whole_and_taken_once(tmp_path: Path) -> None:
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue("ingest")
        queue.put({"task": "drain"})
        message = queue.get(timeout=1)
        message.ack()
        queue.close()

    assert message.payload == {"task": "drain"}
    assert not list(tmp_path.glob("*.part"))


def test_a_message_still_being_written_is_not_taken(tmp_path: Path) -> None:
    # What a publisher leaves between creating its file and finishing it.
    (tmp_path / "1_0a.ingest.msg.part").write_bytes(b"")
    with _connection(tmp_path) as conn:
        channel = conn.default_channel
        assert isinstance(channel, Channel)
        with pytest.raises(Empty):  # nothing whole to take
            channel._get("ingest")


def test_the_embedded_default_uses_this_transport(settings) -> None:
    from kombu.transport import TRANSPORT_ALIASES

    if not settings.CELERY_BROKER_URL.startswith("filesystem://"):
        assert TRANSPORT_ALIASES["filesystem"] in (
            "kombu.transport.filesystem:Transport",
            "apps.core.filesystem_broker:Transport",
        )
        return
    assert TRANSPORT_ALIASES["filesystem"] == "apps.core.filesystem_broker:Transport"
