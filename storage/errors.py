"""The store's errors, and object-storage failures as one line a user can act on: the root,
the cause, the fix.

The error classes live here (storage/store.py re-exports them), so that this module and the
store import in one direction only.

boto, s3fs and fsspec report a wrong key, a missing bucket or an unreachable endpoint as
exceptions from deep inside their stacks (a 70-170-line traceback). `explain` recognises
them by their class names and error codes (so botocore need not be installed to import
this module) and says which variable or package to change.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

CREDENTIAL_VARS = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (~/.aws/credentials)"
BAD_CREDENTIAL_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidClientTokenId"}
DENIED_CODES = {"AccessDenied", "Forbidden", "403", "AllAccessDisabled", "AccountProblem"}
UNREACHABLE_CLASSES = {
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ClientConnectorError",
    "ConnectionClosedError",
    "ReadTimeoutError",
    "ServerDisconnectedError",
}
# fsspec's protocols whose packages are optional, and what to install for them
PROTOCOL_PACKAGES = {
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "hf": "huggingface_hub",
    "sftp": "paramiko",
    "ssh": "paramiko",
}


class StoreError(RuntimeError):
    """A problem with the store itself (bad root, missing or corrupt artifact)."""


class ArtifactNotFound(StoreError):
    pass


class SchemaMismatch(StoreError):
    pass


class CorruptArtifact(StoreError):
    """A committed file that no longer matches its manifest: readers refuse it rather than use it."""


class AlreadyCommitted(StoreError):
    """A write into an artifact that is committed: committed artifacts are never modified, so the
    writer uses the committed version instead (another run finished the same key first)."""


class RefConflict(StoreError):
    """A ref moved between the moment a writer read it and its update (compare-and-swap failed),
    or two stores' refs diverged; the message names both keys and what to do."""


class RootNotFound(StoreError):
    """The artifact root (a local folder, or an object-store bucket) does not exist."""


class StoreAccessError(StoreError):
    """The root cannot be reached or read (credentials, network, a missing filesystem package);
    the message names the root, the cause and the fix."""


class StoreWriteError(OSError, StoreError):
    """A write that failed (disk full, file too large, ...), naming the file. An OSError, so that
    callers that retry storage hiccups still do; a StoreError, so that the CLI prints one line."""


def filesystem_for(root_uri: str) -> tuple[Any, str]:
    """fsspec's filesystem and path for a root; an unknown protocol or a missing package is a
    StoreError naming the package to install."""
    import fsspec

    scheme = urlsplit(root_uri).scheme
    try:
        return fsspec.core.url_to_fs(root_uri)
    except ImportError as exc:
        package = PROTOCOL_PACKAGES.get(scheme) or (exc.name or "the fsspec implementation")
        raise StoreAccessError(
            f"artifact root {root_uri}: the {scheme}:// protocol needs the package {package}: pip install {package} ({exc})"
        ) from None
    except ValueError as exc:
        if "protocol" not in str(exc).lower():
            raise
        raise StoreAccessError(
            f"artifact root {root_uri}: unknown protocol {scheme}://; use a local folder or s3://bucket/prefix"
        ) from None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code:
            return str(code)
    return None


def _endpoint() -> str:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "the default AWS endpoint"


def explain(exc: BaseException, root: str | None) -> str | None:
    """One line for a storage failure (`root: cause: fix`), or None when `exc` is not one."""
    where = f"artifact root {root}" if root else "object storage"
    chain = _chain(exc)
    names = {type(e).__name__ for e in chain}
    codes = {code for e in chain if (code := _error_code(e))}
    text = " ".join(str(e) for e in chain)
    bucket = urlsplit(root).netloc if root and "://" in root else ""
    if names & {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"}:
        return f"{where}: no S3 credentials found: set {CREDENTIAL_VARS}"
    if (
        codes & BAD_CREDENTIAL_CODES
        or "Access Key Id you provided does not exist" in text
        or "signature we calculated does not match" in text
    ):
        code = next(iter(sorted(codes & BAD_CREDENTIAL_CODES)), "InvalidAccessKeyId")
        return f"{where}: S3 rejected the credentials ({code}): check {CREDENTIAL_VARS}"
    if names & UNREACHABLE_CLASSES or "Could not connect to the endpoint" in text:
        return f"{where}: cannot reach the S3 endpoint {_endpoint()}: check AWS_ENDPOINT_URL and the network"
    if "NoSuchBucket" in codes or "NoSuchBucket" in names or "bucket does not exist" in text:
        name = f" {bucket!r}" if bucket else ""
        return (
            f"{where}: the bucket{name} does not exist: create it (aws s3 mb s3://{bucket or 'BUCKET'}) "
            "or fix the root (--root, XLEMBED_ROOT or the config's pipeline.root)"
        )
    if codes & DENIED_CODES or isinstance(exc, PermissionError) and root and "://" in root:
        code = next(iter(sorted(codes & DENIED_CODES)), "AccessDenied")
        return (
            f"{where}: access denied ({code}): the credentials ({CREDENTIAL_VARS}) may not read or write this bucket and prefix"
        )
    return None
