"""kombu's filesystem transport, with messages that appear whole or not at all.

The embedded default's broker (no server to install). kombu creates a message's
file, then writes it; a worker polling in between moves the empty file away, fails
to parse it and stops. Here a message is written under a name no consumer takes,
then renamed into place: a rename within one directory is atomic.
"""

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# Consumers take only names ending in "<queue>.msg".
_PARTIAL = ".part"


class Channel(filesystem.Channel):
    # kombu's own stubs disagree between its base channel and this one; this is its signature.
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + _PARTIAL
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
