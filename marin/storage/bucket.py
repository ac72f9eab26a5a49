"""Where a bucket lives and whether it suits checkpoints and datasets.

    info = bucket_info("gs://my-bucket/experiments")
    info.location, info.location_type, info.storage_class   # "US-CENTRAL1", "region", "STANDARD"
    for warning in bucket_warnings(info, compute_region="us-central1"): print(warning)

Frequent checkpoint and dataset I/O belongs in a single-region bucket of the standard class,
in the region where the accelerators run: multi-region and dual-region buckets add latency
and replication cost, cold classes add retrieval fees and minimum storage durations, and
cross-region reads pay egress. See docs/tutorials/storage-bucket.md.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from marin.storage import get_storage, scheme_of


@dataclass(frozen=True)
class BucketInfo:
    url: str
    provider: str
    location: str | None
    location_type: str | None  # "region", "dual-region", "multi-region", "local"
    storage_class: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def bucket_info(url: str) -> BucketInfo:
    return get_storage(url).bucket_info(url)


def compute_region() -> str | None:
    """The region the accelerators run in, where known ($MARIN_COMPUTE_REGION)."""
    return os.environ.get("MARIN_COMPUTE_REGION") or None


def bucket_warnings(info: BucketInfo, compute_region: str | None = None) -> list[str]:
    if info.location_type == "local":
        return []
    warnings = []
    if info.location_type in ("multi-region", "dual-region"):
        warnings.append(
            f"{info.url} is a {info.location_type} bucket ({info.location}): checkpoints and "
            "datasets belong in a single-region bucket next to the accelerators; "
            f"{info.location_type} buckets add latency and replication cost and stall "
            "frequent checkpoint I/O")
    if info.storage_class and info.storage_class.upper() != "STANDARD":
        warnings.append(
            f"{info.url} has storage class {info.storage_class}: use STANDARD for data that "
            "training reads and writes often (colder classes charge for retrieval and early "
            "deletion)")
    if (compute_region and info.location and info.location_type == "region"
            and info.location.lower() != compute_region.lower()):
        warnings.append(
            f"{info.url} is in {info.location} but compute runs in {compute_region}: every "
            "read crosses regions (latency and egress cost)")
    return warnings


def local_bucket_info(url: str) -> BucketInfo:
    return BucketInfo(url, scheme_of(url), "local", "local", None)
