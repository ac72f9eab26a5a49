"""Bucket checks against real emulators: single-region, multi-region, S3 regions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marin.storage import StorageError, reset_storage_instances
from marin.storage.bucket import bucket_info, bucket_warnings
from tests import servers
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _marin(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, env={**os.environ, **env})


def test_a_single_region_standard_bucket_passes(gcs_bucket: str):
    info = bucket_info(gcs_bucket + "/checkpoints")
    assert (info.location, info.location_type, info.storage_class) == (
        "US-CENTRAL1", "region", "STANDARD")
    assert bucket_warnings(info) == []
    assert bucket_warnings(info, compute_region="us-central1") == []


def test_a_bucket_far_from_the_compute_region_is_flagged(gcs_bucket: str):
    [warning] = bucket_warnings(bucket_info(gcs_bucket), compute_region="europe-west4")
    assert "is in US-CENTRAL1 but compute runs in europe-west4" in warning


def test_a_multi_region_bucket_is_flagged_by_the_cli_and_the_executor(tmp_path: Path,
                                                                     monkeypatch):
    with servers.multi_region_gcs_emulator() as endpoint:
        bucket = servers.create_gcs_bucket(endpoint)
        env = {"STORAGE_EMULATOR_HOST": endpoint}
        out = _marin("storage", "check", f"gs://{bucket}", "--json", env=env)
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert (report["location"], report["location_type"]) == ("US", "multi-region")
        assert "multi-region bucket" in report["warnings"][0]
        human = _marin("storage", "check", f"gs://{bucket}", env=env)
        assert "warning:" in human.stdout and "single-region" in human.stdout
        run = _marin("executor", "--dry-run", "--prefix", f"gs://{bucket}/exp",
                     "tests.fixtures.ledger_experiment", env=env)
        assert run.returncode == 0, run.stderr
        assert "multi-region bucket" in run.stdout


def test_s3_buckets_report_their_region(s3_bucket: str):
    info = bucket_info(s3_bucket)
    assert (info.provider, info.location, info.location_type) == ("s3", "eu-west-1", "region")
    assert bucket_warnings(info, compute_region="eu-west-1") == []
    assert "compute runs in us-east-1" in bucket_warnings(info, compute_region="us-east-1")[0]


def test_gs_without_credentials_is_one_clear_line(tmp_path: Path, monkeypatch):
    env = {"HOME": str(tmp_path), "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
           "GOOGLE_APPLICATION_CREDENTIALS": ""}
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    clean = {k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"}
    out = subprocess.run([sys.executable, "-m", "marin.cli", "storage", "check",
                          "gs://some-bucket/x"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, env={**clean, **env})
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert lines[0].startswith("error: gs:// needs Google Cloud credentials")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    reset_storage_instances()
    with pytest.raises(StorageError, match="STORAGE_EMULATOR_HOST"):
        bucket_info("gs://some-bucket")
    reset_storage_instances()


def test_an_unknown_scheme_is_one_clear_line():
    out = _marin("storage", "check", "azure://container/x", env={})
    assert out.returncode == 2
    assert out.stderr.startswith("error: no storage backend for 'azure://container/x'")
    assert "gs://" in out.stderr and "s3://" in out.stderr


@pytest.mark.parametrize("url", ["not-a-url", "", "/nonexistent/dir"])
def test_storage_check_refuses_what_is_neither_a_bucket_nor_a_folder(url: str):
    out = subprocess.run([sys.executable, "-m", "marin.cli", "storage", "check", url],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2, out.stdout
    assert "ok:" not in out.stdout and "name a bucket" in out.stderr


@pytest.mark.parametrize("content", [None, "{not json", '["a list"]'])
def test_a_bad_google_credentials_file_is_named(tmp_path: Path, content: str | None):
    key = tmp_path / "key.json"
    if content is not None:
        key.write_text(content)
    env = {k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"}
    out = subprocess.run([sys.executable, "-m", "marin.cli", "storage", "check", "gs://b"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**env, "GOOGLE_APPLICATION_CREDENTIALS": str(key)})
    assert out.returncode == 2
    assert f"GOOGLE_APPLICATION_CREDENTIALS={key}" in out.stderr
    assert "none were found" not in out.stderr


def test_s3_without_credentials_leaves_no_unawaited_coroutine():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") or k == "AWS_EC2_METADATA_DISABLED"}
    out = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "marin.cli",
                          "storage", "check", "s3://b"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120,
                         env={**env, "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
                              "AWS_CONFIG_FILE": "/nonexistent"})
    assert out.returncode == 2 and "needs AWS credentials" in out.stderr
    assert "never awaited" not in out.stderr
