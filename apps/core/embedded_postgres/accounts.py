"""The user the server runs as, and the directories that must be that user's alone.

PostgreSQL refuses to run as root; as root, the server runs as the system user
``SERVER_USER``, which must be able to reach the binaries and own the server's files.
"""

import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

from apps.core.embedded_postgres.layout import SERVER_USER, EmbeddedPostgresError

# The server's system user when we are root; None when the server runs as ourselves.
Account = pwd.struct_passwd | None


def server_account() -> Account:
    """The system user the server runs as when we are root; None means ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        raise EmbeddedPostgresError(
            f"PostgreSQL will not run as root and there is no useradd to create {SERVER_USER}: "
            "run as another user, or set DATABASE_URL"
        )
    subprocess.run(
        [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
         "--shell", "/usr/sbin/nologin", SERVER_USER],
        check=True, capture_output=True,
    )  # fmt: skip
    return pwd.getpwnam(SERVER_USER)


def own_directory(path: Path, *, account: Account, adopt: bool) -> None:
    """Make ``path`` a directory of the server's user alone. ``adopt`` takes over one that
    exists; without it (a directory in /tmp, where anyone may have made it first) an
    existing directory must already be the server user's, with no access for others."""
    try:
        path.mkdir(mode=0o700, parents=True)
        created = True
    except FileExistsError:
        created = False
    if created or adopt:
        if account is not None:
            os.chown(path, account.pw_uid, account.pw_gid)
        path.chmod(0o700)
    info = path.lstat()
    uid = os.geteuid() if account is None else account.pw_uid
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
        raise EmbeddedPostgresError(
            f"{path} must be a directory owned by the server's user with mode 700; remove it"
        )


def open_for_traversal(path: Path) -> list[Path]:
    """Let others pass through (not list) the directories above ``path`` that we own.

    As root the server runs as its own user, who must pass through every directory above
    its binaries and files; a checkout in a private directory (``mktemp -d`` makes one of
    mode 700) would stop it. Returns the directories changed, for the caller to say so.
    """
    opened = []
    for directory in reversed(path.parents):
        info = directory.stat()
        if info.st_uid == os.geteuid() and not info.st_mode & stat.S_IXOTH:
            directory.chmod(stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
            opened.append(directory)
    return opened


def check_reachable(path: Path, *, account: pwd.struct_passwd) -> None:
    """As root the server runs as another user, who must be able to enter every directory
    above its binaries and its files; say which one stops it rather than let it fail."""
    for directory in reversed(path.parents):
        info = directory.stat()
        if info.st_uid == account.pw_uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid == account.pw_gid:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            raise EmbeddedPostgresError(
                f"PostgreSQL refuses to run as root, and its user {SERVER_USER} cannot enter "
                f"{directory}: allow it (chmod o+x {directory}), or set DATABASE_URL"
            )


def as_account(account: Account) -> dict[str, Any]:
    """Keyword arguments for ``subprocess`` that run a command as the server's user."""
    if account is None:
        return {}
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


def run_as(
    command: list[str], *, account: Account, **kwargs: Any
) -> subprocess.CompletedProcess[Any]:
    return subprocess.run(command, check=False, **as_account(account), **kwargs)
