"""The package as a user installs it: ``pip install ./clients/python`` into a folder of
its own, then imported from there alone, typed (``py.typed`` shipped) and at the version
it says."""

import shutil
import subprocess
import sys
from pathlib import Path

import latency_budgets
import pytest

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"

pytestmark = [pytest.mark.slow]


def test_pip_installs_a_typed_package_that_imports_on_its_own(tmp_path: Path) -> None:
    # Built from a copy: the build leaves nothing in the checkout.
    source = tmp_path / "source"
    shutil.copytree(
        CLIENT, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target"]
    result = subprocess.run(
        [*pip, str(target), str(source)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr

    package = target / "latency_budgets"
    assert (package / "py.typed").is_file()
    modules = sorted(path.name for path in package.glob("*.py"))
    assert modules == sorted(
        path.name for path in (CLIENT / "src" / "latency_budgets").glob("*.py")
    )
    (dist_info,) = target.glob("latency_budgets-*.dist-info")
    metadata = (dist_info / "METADATA").read_text()
    assert "Name: latency-budgets\n" in metadata
    assert f"Version: {latency_budgets.__version__}\n" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert [r for r in requires if "extra ==" not in r] == [
        "Requires-Dist: opentelemetry-api<2,>=1.27"
    ]
    assert "latency_budgets/py.typed," in (dist_info / "RECORD").read_text()

    # Imported from the target ahead of everything (the checkout's editable install
    # included); only its one dependency comes from the environment.
    check = f"""
import importlib.metadata, importlib.resources, sys
sys.path.insert(0, {str(target)!r})
import latency_budgets, latency_budgets.levers, latency_budgets.alevers
assert latency_budgets.__file__.startswith({str(target)!r}), latency_budgets.__file__
assert importlib.resources.files("latency_budgets").joinpath("py.typed").is_file()
assert importlib.metadata.version("latency-budgets") == latency_budgets.__version__
assert "django" not in sys.modules
budgets = latency_budgets.Budgets.from_documents([])
with budgets.request("anything", budget_ms=500) as req:
    assert 0 < req.remaining_ms <= 500
print("ok")
"""
    result = subprocess.run(
        [sys.executable, "-I", "-c", check], capture_output=True, text=True, timeout=60,
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"
