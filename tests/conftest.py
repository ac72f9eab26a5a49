from __future__ import annotations

import os

# Cloud client libraries probe instance-metadata servers when they look for credentials;
# keep every such probe off the network (set before those libraries are imported).
os.environ.update(NO_GCE_CHECK="true", GCE_METADATA_HOST="127.0.0.1:9",
                  GCE_METADATA_IP="127.0.0.1:9", AWS_EC2_METADATA_DISABLED="true")

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import servers

ROOT = Path(__file__).resolve().parent.parent


_SKIPPED: list[str] = []


def pytest_runtest_logreport(report) -> None:
    """With MARIN_FORBID_SKIPS=1 (``.ci/run`` sets it) a skipped test fails the run: in CI
    every test runs, or the run says which did not."""
    if report.skipped and os.environ.get("MARIN_FORBID_SKIPS") == "1":
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus) -> None:
    if _SKIPPED:
        print(f"\nMARIN_FORBID_SKIPS=1: {len(_SKIPPED)} test(s) skipped, which CI does not "
              f"allow: {', '.join(_SKIPPED[:5])}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory) -> Iterator[None]:
    """The session's MARIN_CACHE_DIR (JAX's compilation cache among it) from its start, so
    that module and session fixtures that train share it with the tests, and none of them
    writes into the user's ~/.cache; each test sets it again (``_no_ambient_settings``)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MARIN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "marin-cache"))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch, tmp_path_factory):
    monkeypatch.delenv("MARIN_PREFIX", raising=False)
    monkeypatch.delenv("MARIN_COMPUTE_REGION", raising=False)
    monkeypatch.setenv("MARIN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "marin-cache"))
    for name in ("MARIN_LOGGER", "MARIN_RUN", "MARIN_CLUSTER", "MARIN_CLUSTERS", "MARIN_KV",
                 "MARIN_SERVICES_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MARIN_STATE_DIR", str(tmp_path_factory.getbasetemp() / "marin-state"))


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and modification time."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, folder)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    with servers.gcs_emulator() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    with servers.s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def gcs_bucket(gcs_endpoint: str, monkeypatch) -> Iterator[str]:
    from marin.storage import reset_storage_instances

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_endpoint)
    reset_storage_instances()
    yield f"gs://{servers.create_gcs_bucket(gcs_endpoint)}"
    reset_storage_instances()


@pytest.fixture
def s3_bucket(s3_endpoint: str, monkeypatch) -> Iterator[str]:
    from marin.storage import reset_storage_instances

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    for key, value in servers.S3_ENV.items():
        monkeypatch.setenv(key, value)
    reset_storage_instances()
    yield f"s3://{servers.create_s3_bucket(s3_endpoint)}"
    reset_storage_instances()


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Iterator[Path]:
    """A BPE tokenizer and a token cache of real text (tests/helpers/training.py), built once
    and shared by every test of the session: read it, never write into it (copy it to
    ``tmp_path`` first). Its teardown fails the session if anything under it changed."""
    from tests.helpers.training import build_cache

    yield from _read_only(build_cache(tmp_path_factory.mktemp("train-data")))


@pytest.fixture(scope="session")
def docs_cache(cache: Path, tmp_path_factory) -> Iterator[Path]:
    """The Python help topics tokenized with ``cache``'s tokenizer (tests/helpers/caches.py),
    shared as ``cache`` is."""
    from tests.helpers.caches import build_docs_cache

    yield from _read_only(build_docs_cache(cache, tmp_path_factory.mktemp("docs-data")))


@pytest.fixture(scope="session")
def trained(cache: Path, tmp_path_factory):
    """The export tests' 3-step run (tests/helpers/export.py), trained once per session;
    a test that changes it works on a copy."""
    from tests.helpers.export import train_export_run

    return train_export_run(cache, tmp_path_factory.mktemp("export-prefix"))


@pytest.fixture(scope="session")
def readme_study(tmp_path_factory) -> tuple[Path, list[str]]:
    """The README's main job, reduced (tests/helpers/readme_study.py), run once per session:
    its folder (``local_store/`` the prefix) and the lines it printed from the executor's
    summary on. Tests read it; one that writes beside it writes only what the README's own
    commands write there (``plots/``)."""
    from tests.helpers.readme_study import run_reduced_study

    return run_reduced_study(tmp_path_factory.mktemp("readme"))


def _read_only(folder: Path) -> Iterator[Path]:
    from marin.processing.tokenize.cache import USAGE

    def contents() -> set[tuple[str, tuple[int, int]]]:
        """Each file's size and time, each folder's name; a read logs itself under USAGE."""
        return {(p, (0, 0) if (folder / p).is_dir() else v)
                for p, v in snapshot(folder).items() if USAGE not in Path(p).parts}

    before = contents()
    yield folder
    changed = sorted(before ^ contents())
    assert not changed, (f"a test wrote into the shared {folder} ({changed[0][0]}, ...): "
                         "copy it under tmp_path before writing")
