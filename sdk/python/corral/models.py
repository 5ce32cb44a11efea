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
    # The node that runs it (a fleet: docs/fleet.md); state "lost" when
    # that node was marked lost.
    node: str = ""

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
            node=str(doc.get("node") or ""),
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


def _ms(doc: dict, key: str) -> Optional[int]:
    """A time as unix ms: ``key_ms`` (an int) or ``key`` (an int)."""
    value = doc.get(key + "_ms", doc.get(key))
    return int(value) if isinstance(value, (int, float)) else None


@dataclass
class TaskOutput:
    """One collected output of a task: where it was, and what was stored."""

    index: int
    path: str
    present: bool = False
    size: int = 0
    sha256: Optional[str] = None

    @classmethod
    def from_json(cls, doc: dict, index: int) -> "TaskOutput":
        return cls(index=int(doc.get("index", index)), path=str(doc.get("path", "")),
                   present=bool(doc.get("present", False)), size=int(doc.get("size") or 0),
                   sha256=doc.get("sha256"))


FINISHED_TASK_STATUSES = ("succeeded", "failed", "timed_out", "cancelled")


@dataclass
class TaskInfo:
    """A task (docs/tasks.md): its status, how it ended and its outputs."""

    id: str
    status: str
    stage: str = ""
    reason: Optional[str] = None
    detail: Optional[str] = None
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    sandbox_id: Optional[str] = None
    attempt: int = 1
    replay_of: Optional[str] = None
    outputs: list = field(default_factory=list)
    snapshot_id: Optional[str] = None
    snapshot_error: Optional[str] = None
    created_at_ms: Optional[int] = None
    started_at_ms: Optional[int] = None
    finished_at_ms: Optional[int] = None
    request: Optional[dict] = None
    # What a replay starts from (GET of one task): the resolved sandbox
    # spec, the image, the kept input copies, secret names (never values).
    resolved: Optional[dict] = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_TASK_STATUSES

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    @classmethod
    def from_json(cls, doc: dict) -> "TaskInfo":
        return cls(
            id=str(doc.get("id", "")),
            status=str(doc.get("status", "")),
            stage=str(doc.get("stage") or ""),
            reason=doc.get("reason"),
            detail=doc.get("detail"),
            exit_code=doc.get("exit_code"),
            signal=doc.get("signal"),
            sandbox_id=doc.get("sandbox_id"),
            attempt=int(doc.get("attempt") or 1),
            replay_of=doc.get("replay_of"),
            outputs=[TaskOutput.from_json(o, i) for i, o in enumerate(doc.get("outputs") or [])],
            snapshot_id=doc.get("snapshot_id"),
            snapshot_error=doc.get("snapshot_error"),
            created_at_ms=_ms(doc, "created_at"),
            started_at_ms=_ms(doc, "started_at"),
            finished_at_ms=_ms(doc, "finished_at"),
            request=doc.get("request"),
            resolved=doc.get("resolved"),
        )
