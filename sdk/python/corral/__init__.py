"""Python client of the corral sandbox daemon (``corral serve``).

    import corral
    client = corral.Client()                     # unix:/run/corral/corral.sock
    with client.create(memory="512Mi") as sb:
        print(sb.exec("echo hi").stdout)

Standard library only; see sdk/python/README.md.
"""

from .client import DEFAULT_URL, Client, Process, Sandbox
from .e2b import E2bClient, E2bSandbox, connect
from .errors import (
    BadRequest,
    Conflict,
    ConnectionFailed,
    CorralError,
    Forbidden,
    InsufficientStorage,
    InternalError,
    NotFound,
    OverCapacity,
    RequestTimeout,
    SandboxExpired,
    SetupFailed,
    Unauthorized,
    Unavailable,
)
from .models import ExecResult, FileEntry, ProcessInfo, SandboxInfo, TaskInfo, TaskOutput

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL", "Client", "Sandbox", "Process", "E2bClient", "E2bSandbox", "connect",
    "ExecResult", "SandboxInfo", "ProcessInfo", "FileEntry", "TaskInfo", "TaskOutput",
    "CorralError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "RequestTimeout", "Conflict",
    "SandboxExpired", "OverCapacity", "SetupFailed", "InternalError", "Unavailable",
    "InsufficientStorage", "ConnectionFailed",
]
