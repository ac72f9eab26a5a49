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


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """A BPE tokenizer and a token cache of real text (tests/helpers/training.py)."""
    from tests.helpers.training import build_cache

    return build_cache(tmp_path_factory.mktemp("train-data"))
