import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.core import embedded_postgres


@pytest.fixture
def server_var_dir() -> Iterator[Path]:
    """A var directory for an embedded server of the test's own, stopped afterwards.

    Not under ``tmp_path``: run as root, the server runs as its own user, who may not enter
    pytest's directories (mode 700).
    """
    base = Path(tempfile.mkdtemp(prefix="budgets-test-"))
    base.chmod(0o711)
    var = base / "var"
    try:
        yield var
    finally:
        embedded_postgres.stop(var_dir=var)
        shutil.rmtree(base)
