"""Plain data returned by the client (parsed from the daemon's JSON)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Optional


def read_bytes(doc: dict, key: str) -> bytes:
    """A byte string sent as ``key`` (UTF-8 text) or ``key_b64`` (base64)."""
    if doc.get(key + "_b64") is not None:
        return base64.b64decode(doc[key + "_b64"])
    value = doc.get(key)
    return value.encode("utf-8") if isinstance(value, str) else b""


def read_text(doc: dict, key: str) -> str:
    """Like read_bytes, as str (undecodable bytes kept as surrogates)."""
    if doc.get(key + "_b64") is not None:
        return base64.b64decode(doc[key + "_b64"]).decode("utf-8", "surrogateescape")
    return str(doc.get(key) or "")


@dataclass
class ExecResult:
    """How a command ended and what it printed."""

    exit_code: Optional[int] = None
    signal: Optional[int] = None
    timed_out: bool = False
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int = 0
    process_id: str = ""

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.exit_code == 0

    @property
    def text(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @classmethod
    def from_json(cls, doc: dict, stdout: bytes = b"", stderr: bytes = b"") -> "ExecResult":
        return cls(
            exit_code=doc.get("exit_code"),
            signal=doc.get("signal"),
            timed_out=bool(doc.get("timed_out", False)),
            stdout=read_bytes(doc, "stdout") or stdout,
            stderr=read_bytes(doc, "stderr") or stderr,
            stdout_truncated=bool(doc.get("stdout_truncated", False)),
            stderr_truncated=bool(doc.get("stderr_truncated", False)),
            duration_ms=int(doc.get("duration_ms") or 0),
            process_id=str(doc.get("process_id") or ""),
        )


@dataclass
class SandboxInfo:
    """A sandbox's state, spec (as stored, sizes in bytes) and usage."""

    id: str
    state: str
    spec: dict = field(default_factory=dict)
    usage: Optional[dict] = None
    created_at_ms: int = 0
    updated_at_ms: int = 0
    expires_at_ms: Optional[int] = None
    error: Optional[str] = None
    residue: list = field(default_factory=list)
    residue_bytes: int = 0
    # The resolved policy of a live networked sandbox (address, host_address,
    # mode, template, allow, deny, gateway); None without network.
    network: Optional[dict] = None

    @classmethod
    def from_json(cls, doc: dict) -> "SandboxInfo":
        return cls(
            id=str(doc.get("id", "")),
            state=str(doc.get("state", "")),
            spec=doc.get("spec") or {},
            usage=doc.get("usage"),
            created_at_ms=int(doc.get("created_at_ms") or 0),
            updated_at_ms=int(doc.get("updated_at_ms") or 0),
            expires_at_ms=doc.get("expires_at_ms"),
            error=doc.get("error"),
            residue=list(doc.get("residue") or []),
            residue_bytes=int(doc.get("residue_bytes") or 0),
            network=doc.get("network"),
        )


@dataclass
class ProcessInfo:
    """A background process: its state, exit and output sizes so far."""

    id: str
    sandbox_id: str
    argv: list
    state: str
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    timed_out: bool = False
    started_at_ms: int = 0
    ended_at_ms: Optional[int] = None
    stdout_bytes: int = 0
    stderr_bytes: int = 0

    @property
    def running(self) -> bool:
        return self.state in ("starting", "running")

    @classmethod
    def from_json(cls, doc: dict) -> "ProcessInfo":
        return cls(
            id=str(doc.get("id", "")),
            sandbox_id=str(doc.get("sandbox_id", "")),
            argv=list(doc.get("argv") or []),
            state=str(doc.get("state", "")),
            exit_code=doc.get("exit_code"),
            signal=doc.get("signal"),
            timed_out=bool(doc.get("timed_out", False)),
            started_at_ms=int(doc.get("started_at_ms") or 0),
            ended_at_ms=doc.get("ended_at_ms"),
            stdout_bytes=int(doc.get("stdout_bytes") or 0),
            stderr_bytes=int(doc.get("stderr_bytes") or 0),
        )


@dataclass
class FileEntry:
    """One file as listed or stat'ed: type is file, directory, symlink or other."""

    name: str
    type: str
    size: int = 0
    mode: int = 0
    mtime_ms: int = 0
    link_target: str = ""

    @property
    def is_dir(self) -> bool:
        return self.type == "directory"

    @classmethod
    def from_json(cls, doc: dict) -> "FileEntry":
        return cls(
            name=read_text(doc, "name"),
            type=str(doc.get("type", "")),
            size=int(doc.get("size") or 0),
            mode=int(doc.get("mode") or 0),
            mtime_ms=int(doc.get("mtime_ms") or 0),
            link_target=read_text(doc, "link_target"),
        )
