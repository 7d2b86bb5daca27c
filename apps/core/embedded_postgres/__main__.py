"""``python -m apps.core.embedded_postgres start | stop | status | url``"""

import argparse
import sys
from collections.abc import Sequence

from apps.core.embedded_postgres.layout import EmbeddedPostgresError, default_var_dir, server_at
from apps.core.embedded_postgres.server import is_running, start, stop


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m apps.core.embedded_postgres",
        description="The PostgreSQL server the app uses when DATABASE_URL is unset.",
    )
    parser.add_argument("command", choices=["start", "stop", "status", "url"])
    command = parser.parse_args(argv).command
    var_dir = default_var_dir()
    try:
        if command == "start":
            server = start(var_dir=var_dir)
            print(f"PostgreSQL is running: data in {server.data}, socket in {server.socket_dir}")
        elif command == "stop":
            print("PostgreSQL stopped" if stop(var_dir=var_dir) else "PostgreSQL was not running")
        elif command == "status":
            running = is_running(var_dir=var_dir)
            print("running" if running else "not running")
            return 0 if running else 3
        else:
            print(server_at(var_dir=var_dir).url())
    except EmbeddedPostgresError as exc:
        print(f"embedded PostgreSQL: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
