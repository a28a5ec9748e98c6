"""Snapshots of learned state: versioned, checksummed, optionally signed, as files and as rows.

A snapshot file is a zip of `manifest.json` (version, namespace, policy, creation time, sample count,
which log entries it covers, SHA-256 of the state) and `state.bin` (the packed state). A detached
Ed25519 signature over the manifest bytes (which carry the state's checksum) sits beside it as
`FILE.sig`. The version is semantic: its major is the learner state schema, so a snapshot from
another major is refused rather than half-loaded.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from toolwise.errors import UserError
from toolwise.feedback.files import open_private
from toolwise.feedback.records import SnapshotRecord
from toolwise.rl.learner import STATE_SCHEMA

VERSION = f"{STATE_SCHEMA}.0.0"  # major.minor.patch; major = learner state schema
_EPOCH = (1980, 1, 1, 0, 0, 0)


class SnapshotError(UserError):
    """A snapshot that must not be loaded; the message says why. Nothing was changed."""


def checksum(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def manifest_bytes(snapshot: SnapshotRecord) -> bytes:
    """What gets signed: every field but the payload (its checksum stands for it) and the signature."""
    manifest = {
        "version": snapshot.version,
        "namespace": snapshot.namespace,
        "policy": snapshot.policy,
        "source": snapshot.source,
        "created_at": snapshot.created_at.isoformat(),
        "sample_count": snapshot.sample_count,
        "covered": snapshot.covered,
        "sha256": snapshot.sha256,
    }
    return json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()


def verify(snapshot: SnapshotRecord, public_key: Ed25519PublicKey | None = None) -> None:
    """Raise SnapshotError unless the major version matches, the checksum holds and, when a key is
    given, the signature is present and valid."""
    major = snapshot.version.split(".", 1)[0]
    if major != str(STATE_SCHEMA):
        raise SnapshotError(
            f"snapshot version {snapshot.version} has major {major}; this toolwise reads major {STATE_SCHEMA} only"
        )
    actual = checksum(snapshot.payload)
    if actual != snapshot.sha256:
        raise SnapshotError(
            f"snapshot checksum mismatch: manifest says {snapshot.sha256[:12]}…, state is {actual[:12]}…"
        )
    if public_key is not None:
        if snapshot.signature is None:
            raise SnapshotError("snapshot is not signed, but a verify key was given")
        if not signed_by(snapshot, public_key):
            raise SnapshotError("snapshot signature does not verify with the given public key")


def signed_by(snapshot: SnapshotRecord, public_key: Ed25519PublicKey) -> bool:
    """Whether the snapshot's manifest carries a signature of the key's (its payload's checksum not checked)."""
    try:
        public_key.verify(snapshot.signature or b"", manifest_bytes(snapshot))
    except InvalidSignature:
        return False
    return True


def sign(snapshot: SnapshotRecord, private_key: Ed25519PrivateKey) -> SnapshotRecord:
    return replace(snapshot, signature=private_key.sign(manifest_bytes(snapshot)))


# -- files -----------------------------------------------------------------------------------------


def write_file(snapshot: SnapshotRecord, path: Path, *, overwrite: bool = True) -> None:
    """The snapshot as a file; its signature, if any, as `path.sig` beside it. Without `overwrite`,
    an existing file is refused (checked by the exclusive create itself, so no race can slip by)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(zipfile.ZipInfo("manifest.json", _EPOCH), manifest_bytes(snapshot))
        archive.writestr(zipfile.ZipInfo("state.bin", _EPOCH), snapshot.payload)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not overwrite:
        refuse_existing(path)
    try:
        with open_private(path, exclusive=not overwrite) as f:  # the learned state tells what users asked
            f.write(buffer.getvalue())
    except FileExistsError:
        raise SnapshotError(f"{path.name} already exists; pass overwrite to replace it") from None
    signature = signature_path(path)
    if snapshot.signature is not None:
        with open_private(signature) as f:
            f.write(snapshot.signature)
    elif signature.exists():
        signature.unlink()  # a stale signature of an earlier file would not verify this one


def refuse_existing(path: Path) -> None:
    """SnapshotError if a dump to `path` without overwrite would be refused: it, or its `.sig`, exists
    (checked before a snapshot is taken, so that a refused dump stores none)."""
    for existing in (path, signature_path(path)):
        if existing.exists():
            raise SnapshotError(f"{existing.name} already exists; pass overwrite to replace it")


def signature_path(path: Path) -> Path:
    return path.with_name(path.name + ".sig")


def confined(folder: Path, name: str) -> Path:
    """`name` inside `folder`, for paths that come from an MCP client: an absolute path, a `..` step or
    a symlink leading out is refused with a message that says nothing about what lies outside."""
    try:
        name.encode()
    except UnicodeEncodeError:  # half a surrogate pair (a client that cut the string): no file system's name
        raise SnapshotError(f"{name!r} is not a file name: it holds half a surrogate pair") from None
    relative = Path(name)
    if not name or relative.is_absolute() or relative.anchor or ".." in relative.parts:
        raise SnapshotError(
            f"snapshot file names are relative to the snapshot directory (snapshot_dir), without '..'; got {name!r}"
        )
    root = folder.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root) or path == root:
        raise SnapshotError(f"{name!r} does not name a file inside the snapshot directory (snapshot_dir)")
    return path


def read_file(path: Path) -> SnapshotRecord:
    """A snapshot file (and its `.sig` if present), not yet verified."""
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = json.loads(archive.read("manifest.json"))
            payload = archive.read("state.bin")
        signature = signature_path(path)
        return SnapshotRecord(
            namespace=manifest["namespace"],
            version=manifest["version"],
            policy=manifest["policy"],
            source=manifest["source"],
            created_at=datetime.fromisoformat(manifest["created_at"]),
            sample_count=int(manifest["sample_count"]),
            covered=manifest["covered"],
            sha256=manifest["sha256"],
            payload=payload,
            signature=signature.read_bytes() if signature.exists() else None,
        )
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such file") from None
    except OSError as exc:  # a folder, no permission, a failing disk
        raise SnapshotError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError) as exc:
        raise SnapshotError(f"{path}: not a toolwise snapshot ({type(exc).__name__}: {exc})") from exc


# -- keys ------------------------------------------------------------------------------------------


def generate_keys(private_path: Path, public_path: Path, *, force: bool = False) -> None:
    """A new Ed25519 key pair as PEM files (the private one readable by its owner only). An existing
    key file is kept unless `force`: overwriting a signing key orphans every snapshot it signed."""
    if not force:
        existing = [str(p) for p in (private_path, public_path) if p.exists()]
        if existing:
            verb = "exists" if len(existing) == 1 else "exist"
            raise SnapshotError(f"{' and '.join(existing)} already {verb}; pass --force to replace")
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    if force:
        private_path.unlink(missing_ok=True)
    # Created 0600 from the start: a chmod after writing would leave the key readable for a moment.
    with open_private(private_path, exclusive=True) as f:
        f.write(private)
    public_path.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def load_private_key(path: Path) -> Ed25519PrivateKey:
    key = _load(path, lambda data: serialization.load_pem_private_key(data, password=None))
    if not isinstance(key, Ed25519PrivateKey):
        raise SnapshotError(f"{path}: not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    key = _load(path, serialization.load_pem_public_key)
    if not isinstance(key, Ed25519PublicKey):
        raise SnapshotError(f"{path}: not an Ed25519 public key")
    return key


def _load(path: Path, loader: Callable[[bytes], object]) -> object:
    try:
        return loader(path.read_bytes())
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such key file") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    except (ValueError, TypeError) as exc:
        raise SnapshotError(f"{path}: not a PEM key ({exc})") from exc
