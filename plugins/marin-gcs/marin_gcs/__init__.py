"""Google Cloud Storage for marin: ``gs://bucket/path`` through gcsfs.

    storage = get_storage("gs://my-bucket/experiments")

Leases use GCS generation preconditions: exclusive create is an upload with
``ifGenerationMatch=0``, compare-and-swap an upload with ``ifGenerationMatch=<generation
read>``, release a delete with the same precondition; a reader gets the data and its
generation from one request. With ``STORAGE_EMULATOR_HOST`` set, requests go to that
emulator, anonymously, as Google's own client libraries do.
"""

from __future__ import annotations

import json
import os
import re
from urllib.parse import quote

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # before gcsfs loads

from gcsfs.core import GCSFileSystem

from marin.storage import (
    AsyncObjectStorage,
    Blob,
    StorageError,
    check_reachable,
    split_bucket_url,
)
from marin.storage.bucket import BucketInfo

_BOUNDARY = "marin-boundary-7f3a"
_BATCH = 100  # the most requests GCS takes in one batch request
_PART_STATUS = re.compile(r"Content-ID: <response-(\d+)>.*?HTTP/1\.1 (\d{3})", re.S | re.I)


def split_url(url: str) -> tuple[str, str]:
    return split_bucket_url(url, "gs")


class GcsStorage(AsyncObjectStorage):
    scheme = "gs"

    def __init__(self) -> None:
        self._fs: GCSFileSystem | None = None

    @property
    def fs(self) -> GCSFileSystem:
        if self._fs is None:
            emulator = os.environ.get("STORAGE_EMULATOR_HOST")
            if emulator:
                check_reachable(_with_scheme(emulator), "the GCS emulator (STORAGE_EMULATOR_HOST)")
                self._fs = GCSFileSystem(token="anon", endpoint_url=_with_scheme(emulator))
            else:
                _require_credentials()
                check_reachable("https://storage.googleapis.com", "Google Cloud Storage")
                self._fs = GCSFileSystem(token="google_default")
        return self._fs

    async def _read_async(self, path: str) -> Blob | None:
        bucket, key = split_url(path)
        try:
            headers, data = await self.fs._call("GET", "b/{}/o/{}", bucket, key, alt="media")
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e}") from e
        generation = headers.get("X-Goog-Generation")
        if generation is None:  # some GCS-compatible servers omit it: ask the metadata
            try:
                meta = await self.fs._call("GET", "b/{}/o/{}", bucket, key, json_out=True)
            except FileNotFoundError:
                return None
            generation = meta["generation"]
        return Blob(path, data, int(generation))

    def write(self, path: str, data: bytes) -> None:
        self._upload(path, data)

    def create_if_absent(self, path: str, data: bytes) -> int | None:
        return self._upload(path, data, ifGenerationMatch="0")

    def compare_and_swap(self, path: str, token: int, data: bytes) -> int | None:
        return self._upload(path, data, ifGenerationMatch=str(token))

    def delete_if_unchanged(self, path: str, token: int) -> bool:
        # Swap in an empty tombstone first (an upload precondition), then delete that
        # generation. GCS enforces both preconditions; emulators seen so far enforce only
        # the upload's, and the tombstone keeps the check honest there too. Readers treat
        # an empty lease as free.
        tombstone = self.compare_and_swap(path, token, b"")
        if tombstone is None:
            return False
        bucket, key = split_url(path)
        try:
            self.fs.call("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=str(tombstone))
        except (FileNotFoundError, FileExistsError):  # 404, or 412: taken meanwhile
            pass
        return True

    def _delete_keys(self, keys: list[str]) -> None:
        self._run(self._delete_batches(keys))

    async def _delete_batches(self, keys: list[str]) -> None:
        """Batch requests of 100 deletes, several at a time. Each part is a complete HTTP
        request, its header block ended by a blank line: GCS also takes gcsfs's parts
        without one, fake-gcs-server refuses them (400 per part), so gcsfs sends emulators
        single deletes instead, five at a time. Parts answered 429 or 5xx are sent again
        one by one; 404 is no error."""
        import asyncio

        limit = asyncio.Semaphore(max(1, self.read_concurrency // 8))

        async def batch(chunk: list[str]) -> list[str]:
            async with limit:
                return await self._delete_batch(chunk)

        chunks = [keys[i:i + _BATCH] for i in range(0, len(keys), _BATCH)]
        again = [k for found in await asyncio.gather(*(batch(c) for c in chunks)) for k in found]
        await self._delete_singly(again)

    async def _delete_batch(self, keys: list[str]) -> list[str]:
        """Delete ``keys`` in one batch request; returns those to send again."""
        parts = []
        for i, path in enumerate(keys):
            bucket, key = path.split("/", 1)
            parts.append(f"--{_BOUNDARY}\r\nContent-Type: application/http\r\n"
                         f"Content-ID: <{i}>\r\n\r\nDELETE /storage/v1/b/{quote(bucket, '')}/o/"
                         f"{quote(key, '')} HTTP/1.1\r\ncontent-length: 0\r\n\r\n\r\n")
        body = "".join(parts) + f"--{_BOUNDARY}--\r\n"
        _, content = await self.fs._call(
            "POST", self.fs.batch_url_base, data=body,
            headers={"Content-Type": f'multipart/mixed; boundary="{_BOUNDARY}"'})
        codes = {int(i): int(code) for i, code in _PART_STATUS.findall(content.decode())}
        again = []
        for i, path in enumerate(keys):
            code = codes.get(i)
            if code is None or code == 429 or code >= 500:
                again.append(path)
            elif code not in (200, 204, 404):
                raise StorageError(f"cannot delete gs://{path}: the batch request answered "
                                   f"{code} for it")
        return again

    def list_dir(self, path: str) -> list[str]:
        bucket, key = split_url(path.rstrip("/"))
        prefix = f"{key}/" if key else ""
        names: set[str] = set()
        page_token = None
        while True:
            try:
                out = self.fs.call("GET", "b/{}/o", bucket, prefix=prefix, delimiter="/",
                                   pageToken=page_token, json_out=True)
            except FileNotFoundError:
                return []
            names.update(p[len(prefix):].rstrip("/") for p in out.get("prefixes", []))
            names.update(item["name"][len(prefix):] for item in out.get("items", []))
            page_token = out.get("nextPageToken")
            if not page_token:
                return sorted(n for n in names if n)

    def bucket_info(self, url: str) -> BucketInfo:
        bucket, _ = split_url(url)
        try:
            meta = self.fs.call("GET", "b/{}", bucket, json_out=True)
        except FileNotFoundError:
            raise StorageError(f"bucket gs://{bucket} does not exist") from None
        return BucketInfo(url, "gcs", meta.get("location"), meta.get("locationType"),
                          meta.get("storageClass"))

    def _upload(self, path: str, data: bytes, **preconditions: str) -> int | None:
        bucket, key = split_url(path)
        head = (f"--{_BOUNDARY}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
                f"{json.dumps({'name': key})}\r\n--{_BOUNDARY}\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode()
        body = head + data + f"\r\n--{_BOUNDARY}--\r\n".encode()
        try:
            out = self.fs.call(
                "POST", f"{self.fs._location}/upload/storage/v1/b/{{}}/o", bucket,
                uploadType="multipart", json_out=True, data=body,
                headers={"Content-Type": f'multipart/related; boundary="{_BOUNDARY}"'},
                **preconditions)
        except FileExistsError:  # 412: the precondition failed
            return None
        except FileNotFoundError as e:
            raise StorageError(f"cannot write {path}: bucket gs://{bucket} not found") from e
        return int(out["generation"])


def _with_scheme(host: str) -> str:
    return host if host.startswith("http") else f"http://{host}"


def _require_credentials() -> None:
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    key_file = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if key_file:
        _check_key_file(key_file)
    try:
        google.auth.default()
    except DefaultCredentialsError as e:
        if key_file:
            raise StorageError(f"GOOGLE_APPLICATION_CREDENTIALS={key_file} is not usable: "
                               f"{str(e).splitlines()[0]}") from None
        raise StorageError(
            "gs:// needs Google Cloud credentials and none were found: run `gcloud auth "
            "application-default login`, set GOOGLE_APPLICATION_CREDENTIALS to a key file, or "
            "set STORAGE_EMULATOR_HOST to use an emulator") from None


def _check_key_file(path: str) -> None:
    """Name the file and its fault, rather than report that no credentials were found."""
    where = f"GOOGLE_APPLICATION_CREDENTIALS={path}"
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise StorageError(f"{where}: the file does not exist; point the variable at a "
                           "service-account key file or unset it") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise StorageError(f"{where}: not a JSON key file ({e}); download the key again or "
                           "unset the variable") from None
    if not isinstance(data, dict) or "type" not in data:
        raise StorageError(f"{where}: a JSON object with a \"type\" field (service_account, "
                           "authorized_user, ...) is expected; download the key again")
