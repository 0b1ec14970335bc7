"""Sources in object stores: ``s3://bucket/prefix/`` (s3fs), ``gs://`` (gcsfs), ``az://``
(adlfs), read through fsspec where the store's package is installed.

An argument names a prefix (every supported object under it) or one object. Listing gives
each object's ETag and size: the plan compares them with the ledger first and downloads
only an object whose ETag or size changed (its content hash then decides, as for a file).
The object's URL is its source everywhere (doc_id, lineage, citations); the bytes are
extracted from a copy under the cache folder. Credentials and endpoint come from the
Settings' storage options when given, else from the store's standard environment
(AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, ...).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from propdex.errors import PathNotAllowedError, PropdexError
from propdex.ids import sha256_file
from propdex.security import check_uri_allowed
from propdex.settings import Settings
from propdex.sources import Discovery, is_supported

# URL scheme -> the fsspec package that reads it (named in the error when it is missing).
SCHEMES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs",
           "abfs": "adlfs", "abfss": "adlfs"}


@dataclass(frozen=True)
class RemoteObject:
    url: str  # scheme://bucket/key
    etag: str  # as the store gives it ("" when it gives none)
    size: int


class ObjectStoreError(PropdexError):
    """A store that cannot be listed or an object that cannot be read; ``reason`` says why."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


def is_remote(argument: str) -> bool:
    scheme, sep, _ = argument.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def _filesystem(url: str, settings: Settings) -> Any:
    scheme = url.partition("://")[0].lower()
    try:
        import fsspec

        fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError) as exc:
        raise ObjectStoreError(url, f"reading {scheme}:// needs the {SCHEMES[scheme]} package "
                                    f"(pip install {SCHEMES[scheme]})") from exc
    # fsspec keeps one filesystem per set of options, so a run's listing and downloads share
    # one client (creating one costs about a second).
    options: dict[str, Any] = {}
    if SCHEMES[scheme] == "s3fs":
        # Every run lists afresh: a cached listing would hide new, changed and removed objects.
        options["use_listings_cache"] = False
        given = settings.storage_options or {}
        # Named here, not left to botocore, so that a changed endpoint is another filesystem.
        endpoint = given.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            options["endpoint_url"] = endpoint
        if "aws_access_key_id" in given:
            options["key"] = given["aws_access_key_id"]
            options["secret"] = given.get("aws_secret_access_key")
        if "region" in given:
            options["client_kwargs"] = {"region_name": given["region"]}
        # A store that does not answer fails the listing in seconds rather than after
        # botocore's default retries.
        options["config_kwargs"] = {"connect_timeout": 5, "read_timeout": 30,
                                    "retries": {"max_attempts": 2}}
    return fsspec.filesystem(scheme, **options)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, PermissionError):
        return f"access denied: {exc}"
    if isinstance(exc, FileNotFoundError):
        return f"no such bucket or object: {exc}"
    return f"{type(exc).__name__}: {exc}"


def list_objects(url: str, settings: Settings) -> list[RemoteObject]:
    """The supported objects at ``url`` (a prefix or one object), sorted by URL."""
    fs = _filesystem(url, settings)
    scheme = url.partition("://")[0].lower()
    try:
        found = fs.find(url, detail=True)
    except Exception as exc:  # noqa: BLE001 -- botocore, aiohttp and OSError faults alike
        raise ObjectStoreError(url, f"cannot list: {_reason(exc)}") from None
    objects = []
    for path, info in found.items():
        if info.get("type", "file") != "file" or not is_supported(path):
            continue
        etag = info.get("ETag") or info.get("etag") or info.get("md5Hash") or ""
        objects.append(RemoteObject(f"{scheme}://{path.lstrip('/')}", str(etag).strip('"'),
                                    int(info.get("size") or 0)))
    return sorted(objects, key=lambda o: o.url)


def fetch(obj: RemoteObject, settings: Settings) -> tuple[str, str]:
    """A local copy of ``obj`` (under the cache folder, one per object) and the SHA-256 of
    its bytes."""
    folder = settings.cache_path / "objects" / hashlib.sha256(obj.url.encode()).hexdigest()[:24]
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(obj.url.rsplit("/", 1)[-1]).name
    partial = target.with_name(target.name + ".part")
    fs = _filesystem(obj.url, settings)
    try:
        fs.get_file(obj.url, str(partial))  # one GET, streamed to the file
    except Exception as exc:  # noqa: BLE001 -- botocore, aiohttp and OSError faults alike
        partial.unlink(missing_ok=True)
        raise ObjectStoreError(obj.url, f"cannot read: {_reason(exc)}") from None
    os.replace(partial, target)
    return str(target), sha256_file(str(target))


def discover_remote(arguments: list[str], settings: Settings, discovery: Discovery,
                    ) -> list[RemoteObject]:
    """The objects the remote ``arguments`` name. A prefix becomes a pruning root of
    ``discovery`` only once listed: a store that cannot be listed, or an argument outside
    the allowed roots, is refused with its reason and nothing under it is pruned."""
    objects: list[RemoteObject] = []
    for argument in arguments:
        try:
            check_uri_allowed(argument, settings.allowed_roots)
            found = list_objects(argument, settings)
        except PathNotAllowedError as refused:
            discovery.refused.append((argument, refused.reason))
            continue
        except ObjectStoreError as failed:
            discovery.refused.append((argument, failed.reason))
            continue
        if not found:
            discovery.missing.append(argument)
        discovery.roots.append(argument.rstrip("/"))  # listed: its removed objects are pruned
        objects.extend(found)
    return list({o.url: o for o in objects}.values())
