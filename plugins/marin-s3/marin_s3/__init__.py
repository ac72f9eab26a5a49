"""Amazon S3 (and S3-compatible stores) for marin: ``s3://bucket/path`` through s3fs.

    storage = get_storage("s3://my-bucket/experiments")

Leases use S3 conditional writes: exclusive create is a PutObject with ``If-None-Match: *``,
compare-and-swap a PutObject with ``If-Match: <etag read>``, release a DeleteObject with
``If-Match``. ``AWS_ENDPOINT_URL_S3`` (or ``AWS_ENDPOINT_URL``) points at another endpoint,
such as a local moto server.
"""

from __future__ import annotations

import os
from typing import Any

import s3fs
from botocore.exceptions import ClientError

from marin.storage import (
    AsyncObjectStorage,
    Blob,
    StorageError,
    check_reachable,
    split_bucket_url,
)
from marin.storage.bucket import BucketInfo

_CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}


def split_url(url: str) -> tuple[str, str]:
    return split_bucket_url(url, "s3")


class S3Storage(AsyncObjectStorage):
    scheme = "s3"

    def __init__(self) -> None:
        self._fs: s3fs.S3FileSystem | None = None

    @property
    def fs(self) -> s3fs.S3FileSystem:
        if self._fs is None:
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get(
                "AWS_ENDPOINT_URL")
            _require_credentials()
            check_reachable(endpoint or "https://s3.amazonaws.com",
                            "the S3 endpoint" + (" (AWS_ENDPOINT_URL_S3)" if endpoint else ""))
            self._fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True)
        return self._fs

    async def _s3(self, method: str, url: str, **kwargs: Any) -> Any:
        await self.fs.set_session()
        return await getattr(self.fs.s3, method)(**kwargs)

    async def _read_async(self, path: str) -> Blob | None:
        bucket, key = split_url(path)
        try:
            out = await self._s3("get_object", path, Bucket=bucket, Key=key)
            async with out["Body"] as body:
                data = await body.read()
        except ClientError as e:
            if _code(e) in ("NoSuchKey", "404", "NoSuchBucket"):
                return None
            raise StorageError(f"cannot read {path}: {e}") from e
        return Blob(path, data, out["ETag"])

    def _put(self, path: str, data: bytes, **conditions: str) -> str | None:
        bucket, key = split_url(path)
        try:
            out = self._run(self._s3("put_object", path, Bucket=bucket, Key=key, Body=data,
                                     **conditions))
        except ClientError as e:
            if _code(e) in _CONFLICT_CODES or (conditions and _code(e) == "NoSuchKey"):
                return None
            raise StorageError(f"cannot write {path}: {e}") from e
        return out["ETag"]

    def write(self, path: str, data: bytes) -> None:
        self._put(path, data)

    def create_if_absent(self, path: str, data: bytes) -> str | None:
        return self._put(path, data, IfNoneMatch="*")

    def compare_and_swap(self, path: str, token: str, data: bytes) -> str | None:
        return self._put(path, data, IfMatch=token)

    def delete_if_unchanged(self, path: str, token: str) -> bool:
        bucket, key = split_url(path)
        try:
            self._run(self._s3("delete_object", path, Bucket=bucket, Key=key, IfMatch=token))
            return True
        except ClientError as e:
            if _code(e) in _CONFLICT_CODES or _code(e) in ("NoSuchKey", "404"):
                return False
            raise StorageError(f"cannot delete {path}: {e}") from e

    def list_dir(self, path: str) -> list[str]:
        bucket, key = split_url(path.rstrip("/"))
        prefix = f"{key}/" if key else ""

        async def listing() -> list[str]:
            await self.fs.set_session()
            names: set[str] = set()
            paginator = self.fs.s3.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
                names.update(p["Prefix"][len(prefix):].rstrip("/")
                             for p in page.get("CommonPrefixes", []))
                names.update(o["Key"][len(prefix):] for o in page.get("Contents", []))
            return sorted(n for n in names if n)

        try:
            return self._run(listing())
        except ClientError as e:
            if _code(e) == "NoSuchBucket":
                return []
            raise StorageError(f"cannot list {path}: {e}") from e

    def bucket_info(self, url: str) -> BucketInfo:
        bucket, _ = split_url(url)
        try:
            out = self._run(self._s3("get_bucket_location", url, Bucket=bucket))
        except ClientError as e:
            raise StorageError(f"cannot read the location of s3://{bucket}: {e}") from e
        # S3 buckets live in one region; storage classes belong to objects, not buckets.
        return BucketInfo(url, "s3", out.get("LocationConstraint") or "us-east-1", "region",
                          None)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _require_credentials() -> None:
    import botocore.session

    if botocore.session.get_session().get_credentials() is None:
        raise StorageError(
            "s3:// needs AWS credentials and none were found: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run on an instance with a role")
