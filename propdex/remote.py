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
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from propdex.errors import PathNotAllowedError, PropdexError
from propdex.security import check_uri_allowed
from propdex.settings import Settings
from propdex.sources import Discovery, is_supported

# URL scheme -> the fsspec package that reads it (named in the error when it is missing).
SCHEMES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs",
           "abfs": "adlfs", "abfss": "adlfs"}

# Requests of one listing page or download block, the first included: botocore's "standard"
# retry mode repeats 500, 503, SlowDown, throttling and connection faults with jittered
# exponential backoff (waits of at most 1, 2 and 4 s), so a store's bad minute passes while
# one that stays down fails the listing or object in seconds.
STORE_ATTEMPTS = 4
# Bytes of an object held in memory while it is copied, one ranged GET each: a large object
# streams to disk with one block in memory at a time.
COPY_BLOCK = 8 * 2**20


@dataclass(frozen=True)
class RemoteObject:
    url: str  # scheme://bucket/key
    etag: str  # as the store gives it ("" when it gives none)
    size: int


@dataclass(frozen=True)
class ObjectCopy:
    """The local copy of an object and the version it holds (which may be newer than the
    listing's, when the object was overwritten in between)."""
    path: str
    sha256: str
    etag: str
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
                                    "retries": {"mode": "standard",
                                                "total_max_attempts": STORE_ATTEMPTS}}
    return fsspec.filesystem(scheme, **options)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, PermissionError):
        return (f"access denied (wrong credentials, or no permission to list the bucket or "
                f"read the object): {exc}")
    if type(exc).__name__ == "NoCredentialsError":  # botocore found no key, profile or role
        return ("no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
                "PROPDEX_STORAGE_ACCESS_KEY_ID and PROPDEX_STORAGE_SECRET_ACCESS_KEY), a "
                "profile, or an instance role")
    if isinstance(exc, FileNotFoundError):
        return f"no such bucket or object: {exc}"
    if type(exc).__name__ == "FileExpired":  # s3fs: the ETag a ranged GET was bound to is gone
        return "the object changed while it was read; the next run reads its new version"
    return f"{type(exc).__name__}: {exc}"


def _etag(info: dict) -> str:
    """The version tag a store's listing or HEAD gives (s3fs, adlfs: ETag; gcsfs: etag or
    md5Hash), without quotes; "" when it gives none."""
    return str(info.get("ETag") or info.get("etag") or info.get("md5Hash") or "").strip('"')


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
        # A key ending in "/" is a folder marker (consoles create them), not a document,
        # even when its name ends in a document's suffix.
        if info.get("type", "file") != "file" or path.endswith("/") or not is_supported(path):
            continue
        objects.append(RemoteObject(f"{scheme}://{path.lstrip('/')}", _etag(info),
                                    int(info.get("size") or 0)))
    return sorted(objects, key=lambda o: o.url)


def _copy_folder(url: str, settings: Settings) -> Path:
    """The cache folder of one object's copy (its name hashed: keys may hold any character)."""
    return settings.cache_path / "objects" / hashlib.sha256(url.encode()).hexdigest()[:24]


def _kept_copy(target: Path, version: Path, obj: RemoteObject) -> ObjectCopy | None:
    """The copy an earlier fetch left of this very version of ``obj`` (the planning of the
    CLI and then of the flow both fetch what changed): reused rather than downloaded again."""
    try:
        kept = json.loads(version.read_text())
    except (OSError, ValueError):
        return None
    if not (obj.etag and kept.get("etag") == obj.etag and kept.get("size") == obj.size
            and target.is_file() and target.stat().st_size == obj.size):
        return None
    return ObjectCopy(str(target), kept["sha256"], obj.etag, obj.size)


def fetch(obj: RemoteObject, settings: Settings) -> ObjectCopy:
    """A local copy of ``obj`` under the cache folder (one per object, until
    ``discard_copies``) with the SHA-256 of its bytes and the ETag and size it was read at.

    The object streams to disk in ``COPY_BLOCK`` ranged GETs, each conditional on the ETag
    its first request (a HEAD) found: an object overwritten while it is read fails with its
    reason instead of leaving a copy that mixes two versions."""
    folder = _copy_folder(obj.url, settings)
    target = folder / (Path(obj.url.rsplit("/", 1)[-1]).name or "object")
    version = folder / "version.json"
    kept = _kept_copy(target, version, obj)
    if kept is not None:
        return kept
    folder.mkdir(parents=True, exist_ok=True)
    version.unlink(missing_ok=True)
    partial = target.with_name(target.name + ".part")
    fs = _filesystem(obj.url, settings)
    digest = hashlib.sha256()
    try:
        with fs.open(obj.url, "rb", block_size=COPY_BLOCK, cache_type="none") as source, \
                open(partial, "wb") as out:
            etag, size = _etag(source.details) or obj.etag, int(source.size)
            while block := source.read(COPY_BLOCK):
                digest.update(block)
                out.write(block)
    except Exception as exc:  # noqa: BLE001 -- botocore, aiohttp and OSError faults alike
        partial.unlink(missing_ok=True)
        raise ObjectStoreError(obj.url, f"cannot read: {_reason(exc)}") from None
    os.replace(partial, target)
    copy = ObjectCopy(str(target), digest.hexdigest(), etag, size)
    version.write_text(json.dumps({"etag": etag, "size": size, "sha256": copy.sha256}))
    return copy


def discard_copies(copies: list[str]) -> None:
    """Remove the local copies a plan fetched, once the run is done with them: the cache
    folder holds the objects in flight, never a mirror of the bucket."""
    for path in copies:
        shutil.rmtree(Path(path).parent, ignore_errors=True)


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
