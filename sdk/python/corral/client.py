"""Client of the corral daemon's HTTP API (docs/api.md), standard library only."""

from __future__ import annotations

import base64
import hashlib
import http.client
import io
import json
import os
import socket
import stat as stat_module
import time
import warnings
from typing import Any, BinaryIO, Iterable, Iterator, Optional, Union
from urllib.parse import quote, urlencode, urlsplit

from .errors import (
    ConnectionFailed,
    CorralError,
    NotFound,
    RequestTimeout,
    SandboxExpired,
    error_from_body,
    error_from_response,
)
from .models import ExecResult, FileEntry, ProcessInfo, SandboxInfo, TaskInfo

DEFAULT_URL = "unix:/run/corral/corral.sock"
_CHUNK = 1 << 20  # upload/download buffer
_UNSET: Any = object()

Duration = Union[int, float, str]
Size = Union[int, str]


class _UnixConnection(http.client.HTTPConnection):
    """HTTPConnection over a unix socket (the Host header says "localhost")."""

    def __init__(self, path: str, timeout: Optional[float]):
        super().__init__("localhost", timeout=timeout, blocksize=_CHUNK)
        self._socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def _duration(value: Duration) -> Union[int, str]:
    """Seconds (int or float) or a string such as "30s" / "1500ms"."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a duration is seconds or a string like '30s', not {value!r}")
    if float(value).is_integer():
        return int(value)
    return f"{round(value * 1000)}ms"


def _seconds(value: Optional[Duration]) -> Optional[float]:
    """A duration in seconds, for socket timeouts (None when unknown)."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for suffix in ("ms", "s", "m", "h"):
        if value.endswith(suffix):
            try:
                return float(value[: -len(suffix)]) * units[suffix]
            except ValueError:
                return None
    try:
        return float(value)
    except ValueError:
        return None


def _form_data(task: dict, parts: list) -> tuple:
    """A multipart/form-data body: the "task" part (the JSON request), then
    each (name, bytes) of `parts` as it is, with no base64 (docs/api.md
    "Raw bytes: a multipart submit"). Returns (body, Content-Type)."""
    first = json.dumps(task).encode("utf-8")
    bodies = [first] + [data for _, data in parts]
    while True:
        boundary = "corral-" + os.urandom(16).hex()
        delimiter = ("\r\n--" + boundary).encode("ascii")
        if not any(delimiter in b or b.startswith(delimiter[2:]) for b in bodies):
            break
    chunks = []
    for name, ctype, data in [("task", "application/json", first)] + \
            [(name, "application/octet-stream", data) for name, data in parts]:
        chunks.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n'
                      f'Content-Type: {ctype}\r\n\r\n'.encode("ascii"))
        chunks.append(data)
        chunks.append(b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode("ascii"))
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


def _put_bytes(body: dict, key: str, data: Union[str, bytes, None]) -> None:
    """Sets body[key] (UTF-8 text) or body[key + "_b64"] (other bytes)."""
    if data is None:
        return
    if isinstance(data, str):
        body[key] = data
        return
    data = bytes(data)
    try:
        body[key] = data.decode("utf-8")
    except UnicodeDecodeError:
        body[key + "_b64"] = base64.b64encode(data).decode("ascii")


def _exec_body(cmd: Union[str, Iterable[str]], env, cwd, stdin, timeout, max_output_bytes=None) -> dict:
    body: dict = {}
    if isinstance(cmd, str):
        body["cmd"] = cmd
    else:
        body["argv"] = [str(a) for a in cmd]
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if cwd is not None:
        body["cwd"] = cwd
    _put_bytes(body, "stdin", stdin)
    if timeout is not None:
        body["timeout"] = _duration(timeout)
    if max_output_bytes is not None:
        body["max_output_bytes"] = max_output_bytes
    return body


def _file_chunks(fileobj: Any, limit: Optional[int]) -> Iterator[bytes]:
    """Reads a file object in bounded chunks (at most `limit` bytes)."""
    left = limit
    while left is None or left > 0:
        want = _CHUNK if left is None else min(_CHUNK, left)
        chunk = fileobj.read(want)
        if not chunk:
            break
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        if left is not None:
            left -= len(chunk)
        yield chunk


def _iter_chunks(items: Iterable[Any]) -> Iterator[bytes]:
    for chunk in items:
        chunk = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
        if chunk:  # an empty chunk would end a chunked body
            yield chunk


def _regular_file_size(fileobj: Any) -> Optional[int]:
    """Bytes left in a regular, seekable file object; None otherwise."""
    try:
        st = os.fstat(fileobj.fileno())
        if not stat_module.S_ISREG(st.st_mode):
            return None
        return max(0, st.st_size - fileobj.tell())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _copy_body(resp: http.client.HTTPResponse, fileobj: Optional[BinaryIO], what: str,
               digest: Any = None) -> "tuple[int, Optional[bytes]]":
    """Reads a response's body: into ``fileobj`` through one reused buffer
    (a file of any size in constant memory), or with ``fileobj`` None into
    one bytes object sized by Content-Length when there is one. Each fresh
    buffer costs page faults, which on some hosts cost more than the copy:
    a chunk-by-chunk BytesIO was several times slower for 1 MiB. Updates
    ``digest`` (a hashlib object) when given. Returns (size, bytes or None)."""
    expected = resp.getheader("content-length")
    try:
        if fileobj is None and expected is not None:
            data = resp.read()
            if len(data) != int(expected):
                raise ConnectionFailed(0, "connection_failed",
                                       f"{what}: got {len(data)} of {expected} bytes")
            if digest is not None:
                digest.update(data)
            return len(data), data
        parts: "list[bytes]" = []
        buf = bytearray(min(_CHUNK, int(expected)) if expected is not None else _CHUNK) or bytearray(1)
        view = memoryview(buf)
        total = 0
        while True:
            n = resp.readinto(view)
            if not n:
                break
            piece = view[:n]
            if digest is not None:
                digest.update(piece)
            if fileobj is not None:
                fileobj.write(piece)
            else:
                parts.append(bytes(piece))
            total += n
    except (OSError, http.client.HTTPException) as e:
        raise ConnectionFailed(0, "connection_failed", f"{what}: {e}") from e
    if expected is not None and total != int(expected):
        raise ConnectionFailed(0, "connection_failed", f"{what}: got {total} of {expected} bytes")
    return total, (None if fileobj is not None else b"".join(parts))


class _Response:
    """An open response: the connection stays open until close()."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse):
        self.conn = conn
        self.resp = resp

    def read_all(self) -> bytes:
        try:
            return self.resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed(0, "connection_failed", f"reading the response: {e}") from e
        finally:
            self.close()

    def read1(self, size: int = 65536) -> bytes:
        try:
            return self.resp.read1(size)
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed(0, "connection_failed", f"reading the response: {e}") from e

    def close(self) -> None:
        self.conn.close()


class Client:
    """A connection to the corral daemon.

    ``url`` is ``"unix:/path/to/corral.sock"`` (no key needed) or
    ``"http://127.0.0.1:7070"`` (with ``api_key``); defaults come from the
    CORRAL_URL and CORRAL_API_KEY environment variables, then the default
    socket. ``timeout`` bounds each network wait in seconds (commands and
    waits get their own timeout on top of it).
    """

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: Optional[float] = 120.0):
        url = url or os.environ.get("CORRAL_URL") or DEFAULT_URL
        self.api_key = api_key if api_key is not None else os.environ.get("CORRAL_API_KEY") or None
        self.timeout = timeout
        self.url = url
        if url.startswith("unix:"):
            path = url[len("unix:"):]
            if path.startswith("//"):
                path = path[2:]
            if not path.startswith("/"):
                raise ValueError(f"unix URL needs an absolute path: {url!r}")
            self._socket_path: Optional[str] = path
            self._host = self._port = None
            self._tls = False
        else:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"URL must be unix:/path or http://host:port, not {url!r}")
            self._socket_path = None
            self._host = parts.hostname
            self._port = parts.port
            self._tls = parts.scheme == "https"

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # ---- transport ----

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._socket_path is not None:
            return _UnixConnection(self._socket_path, timeout)
        if self._tls:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, blocksize=_CHUNK)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout, blocksize=_CHUNK)

    def _open(self, method: str, path: str, query: Optional[dict] = None, body: Any = None,
              headers: Optional[dict] = None, timeout: Any = _UNSET) -> _Response:
        """Sends a request; returns the open response or raises its error.

        ``body`` is a dict (sent as JSON), bytes, or an iterator of bytes
        (sent chunked unless headers carry a Content-Length).
        """
        if timeout is _UNSET:
            timeout = self.timeout
        target = path
        if query:
            q = {k: ("true" if v is True else "false" if v is False else v)
                 for k, v in query.items() if v is not None}
            target += "?" + urlencode(q, quote_via=quote)
        hdrs = {"Accept": "application/json"}
        if self.api_key:
            hdrs["Authorization"] = f"Bearer {self.api_key}"
        chunked = False
        if isinstance(body, dict):
            body = json.dumps(body).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        elif body is not None and not isinstance(body, (bytes, bytearray, memoryview)):
            chunked = True
        hdrs.update(headers or {})
        if chunked and "Content-Length" not in hdrs:
            hdrs["Transfer-Encoding"] = "chunked"
        else:
            chunked = False
        conn = self._connection(timeout)
        try:
            try:
                conn.request(method, target, body=body, headers=hdrs, encode_chunked=chunked)
            except (BrokenPipeError, ConnectionResetError):
                # The daemon may have answered early (an error) and closed:
                # read that answer if it is there.
                pass
            resp = conn.getresponse()
        except CorralError:
            conn.close()
            raise
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            where = self._socket_path or f"{self._host}:{self._port}"
            raise ConnectionFailed(0, "connection_failed",
                                   f"{method} {path} to {where}: {e}") from e
        except BaseException:
            conn.close()
            raise
        if resp.status >= 400:
            try:
                data = resp.read(64 * 1024)
            except (OSError, http.client.HTTPException):
                data = b""
            conn.close()
            raise error_from_response(resp.status, data)
        return _Response(conn, resp)

    def _json(self, method: str, path: str, query: Optional[dict] = None, body: Any = None,
              headers: Optional[dict] = None, timeout: Any = _UNSET) -> Any:
        data = self._open(method, path, query, body, headers, timeout).read_all()
        if not data:
            return {}
        try:
            return json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise CorralError(0, "bad_response", f"{method} {path}: answer is not JSON: {e}") from e

    def _long_timeout(self, seconds: Optional[float]) -> Optional[float]:
        """Socket timeout for a request that lasts `seconds` by design."""
        if seconds is None or self.timeout is None:
            return None
        return seconds + self.timeout

    # ---- sandboxes ----

    def create(self, image: Optional[str] = None, memory: Optional[Size] = None,
               cpus: Union[int, float, str, None] = None, pids: Optional[int] = None,
               disk: Optional[Size] = None, timeout: Optional[Duration] = None,
               max_lifetime: Optional[Duration] = None, env: Optional[dict] = None,
               mounts: Optional[list] = None, workdir: Optional[str] = None, root: bool = False,
               idempotency_key: Optional[str] = None, **extra: Any) -> "Sandbox":
        """Creates a sandbox and returns it once it runs.

        Sizes are bytes or strings ("512Mi"); durations are seconds or
        strings ("10m"); ``timeout`` is the default per-command timeout;
        ``mounts`` is a list of {"source", "target", "writable"} dicts.
        Other top-level fields of the API (hostname, network, inodes in
        limits) can be given as keyword arguments.
        """
        body: dict = {}
        limits: dict = dict(extra.pop("limits", {}) or {})
        if image is not None:
            body["image"] = image
        for key, value in (("memory", memory), ("cpus", cpus), ("pids", pids), ("disk", disk)):
            if value is not None:
                limits[key] = value
        if timeout is not None:
            limits["timeout"] = _duration(timeout)
        if limits:
            body["limits"] = limits
        if max_lifetime is not None:
            body["max_lifetime"] = _duration(max_lifetime)
        if env:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        if mounts:
            body["mounts"] = list(mounts)
        if workdir is not None:
            body["workdir"] = workdir
        if root:
            body["root"] = True
        body.update(extra)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        doc = self._json("POST", "/v1/sandboxes", body=body, headers=headers)
        return Sandbox(self, SandboxInfo.from_json(doc))

    def list(self, all: bool = False) -> "list[Sandbox]":
        """The sandboxes (with ``all=True`` also the cleaned ones)."""
        doc = self._json("GET", "/v1/sandboxes", query={"all": True} if all else None)
        return [Sandbox(self, SandboxInfo.from_json(d)) for d in doc.get("sandboxes", [])]

    def get(self, sandbox_id: str) -> "Sandbox":
        """The sandbox with this id; raises NotFound when there is none."""
        doc = self._json("GET", f"/v1/sandboxes/{quote(sandbox_id, safe='')}")
        return Sandbox(self, SandboxInfo.from_json(doc))

    # ---- tasks (docs/tasks.md) ----

    def submit_task(self, task_id: str, command: Union[str, Iterable[str], None] = None,
                    inputs: Optional[dict] = None, outputs: Optional[Iterable[Any]] = None,
                    env: Optional[dict] = None, cwd: Optional[str] = None,
                    stdin: Union[str, bytes, None] = None, timeout: Optional[Duration] = None,
                    sandbox: Optional[dict] = None, wait: Optional[Duration] = None,
                    **extra: Any) -> TaskInfo:
        """POST /v1/tasks: submits a task, or finds the one with this id.

        ``command`` is an argv list, or a string run by ``sh -c``.
        ``inputs`` maps a path inside the sandbox to its content (str or
        bytes) or to a dict as the API takes it ({"object": key, "sha256":
        ...}). Bytes (and a bytes ``stdin``) travel as raw parts of a
        multipart/form-data body, never as base64. ``outputs`` are paths (required) or dicts ({"path", "required",
        "max_size"}). Repeating the same call returns the stored task and
        never runs the command again (D6); other fields under the same id
        raise Conflict naming the first that differs. With ``wait`` (at most
        60 s) the daemon answers once the task has finished or the wait has
        passed, so a short task's result comes back with its submit.
        """
        body: dict = {"id": task_id}
        if isinstance(command, str):
            body["sh"] = command
        elif command is not None:
            body["command"] = list(command)
        if sandbox is not None:
            body["sandbox"] = sandbox
        parts = []
        if inputs:
            items = []
            for path, value in inputs.items():
                if isinstance(value, dict):
                    items.append({"path": path, **value})
                elif isinstance(value, str):
                    items.append({"path": path, "content": value})
                else:
                    name = f"input-{len(items)}"
                    parts.append((name, bytes(value)))
                    items.append({"path": path, "content_part": name})
            body["inputs"] = items
        if outputs:
            body["outputs"] = [o if isinstance(o, dict) else {"path": str(o)} for o in outputs]
        if env:
            body["env"] = env
        if cwd is not None:
            body["cwd"] = cwd
        if isinstance(stdin, (bytes, bytearray, memoryview)):
            parts.append(("stdin", bytes(stdin)))
            body["stdin_part"] = "stdin"
        elif stdin is not None:
            body["stdin"] = stdin
        if timeout is not None:
            body["timeout"] = _duration(timeout)
        body.update(extra)
        query = {"wait": _duration(wait)} if wait is not None else None
        seconds = _seconds(wait)
        timeout = self._long_timeout(seconds) if seconds is not None else _UNSET
        if not parts:
            return TaskInfo.from_json(self._json("POST", "/v1/tasks", body=body, query=query,
                                                 timeout=timeout))
        data, content_type = _form_data(body, parts)
        return TaskInfo.from_json(self._json("POST", "/v1/tasks", body=data, query=query,
                                             headers={"Content-Type": content_type},
                                             timeout=timeout))

    def get_task(self, task_id: str, wait: Optional[Duration] = None) -> TaskInfo:
        """GET /v1/tasks/{id}; with ``wait`` the daemon answers once the task
        has finished or the wait (at most 60 s) has passed."""
        query = {"wait": _duration(wait)} if wait is not None else None
        seconds = _seconds(wait)
        return TaskInfo.from_json(self._json(
            "GET", f"/v1/tasks/{quote(task_id, safe='')}", query=query,
            timeout=self._long_timeout(seconds) if seconds is not None else _UNSET))

    def wait_task(self, task_id: str, timeout: Optional[float] = None) -> TaskInfo:
        """Waits (long-polling) until the task has finished; ``timeout``
        seconds at most (None: as long as it takes). Returns the task as it
        is then, finished or not."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 30.0 if deadline is None else min(30.0, deadline - time.monotonic())
            task = self.get_task(task_id, wait=f"{max(0, int(left * 1000))}ms")
            if task.finished or (deadline is not None and time.monotonic() >= deadline):
                return task

    def run_task(self, task_id: str, command: Union[str, Iterable[str], None] = None,
                 wait_timeout: Optional[float] = None, **kwargs: Any) -> TaskInfo:
        """submit_task, then wait_task: the finished task (see TaskInfo.ok).

        The submit itself waits up to 30 s (less with ``wait_timeout``), so
        a short task takes one request."""
        first = 30.0 if wait_timeout is None else max(0.0, min(30.0, wait_timeout))
        deadline = None if wait_timeout is None else time.monotonic() + wait_timeout
        task = self.submit_task(task_id, command, wait=f"{int(first * 1000)}ms", **kwargs)
        if task.finished:
            return task
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.wait_task(task_id, left)

    def list_tasks(self, status: Union[str, Iterable[str], None] = None,
                   created_after_ms: Optional[int] = None, created_before_ms: Optional[int] = None,
                   limit: Optional[int] = None) -> "list[TaskInfo]":
        """GET /v1/tasks, every page: newest first."""
        query: dict = {}
        if status is not None:
            query["status"] = status if isinstance(status, str) else ",".join(status)
        if created_after_ms is not None:
            query["created_after"] = created_after_ms
        if created_before_ms is not None:
            query["created_before"] = created_before_ms
        if limit is not None:
            query["limit"] = limit
        tasks: "list[TaskInfo]" = []
        while True:
            doc = self._json("GET", "/v1/tasks", query=query)
            tasks.extend(TaskInfo.from_json(d) for d in doc.get("tasks", []))
            cursor = doc.get("next_cursor")
            if not cursor or (limit is not None and len(tasks) >= limit):
                return tasks[:limit] if limit is not None else tasks
            query["cursor"] = cursor

    def cancel_task(self, task_id: str) -> TaskInfo:
        """POST /v1/tasks/{id}/cancel: ends a queued or running task."""
        return TaskInfo.from_json(self._json("POST", f"/v1/tasks/{quote(task_id, safe='')}/cancel"))

    def replay_task(self, task_id: str, new_id: Optional[str] = None,
                    network: Union[str, dict, None] = None, from_snapshot: bool = False,
                    timeout: Optional[Duration] = None) -> TaskInfo:
        """POST /v1/tasks/{id}/replay (T2): runs finished task ``task_id``
        again in a fresh sandbox, its inputs read from the copies it kept.

        ``new_id`` defaults to ``{task_id}-replay-N`` (the next free N); the
        same ``new_id`` again returns that replay. ``network`` is "none"
        (the daemon's default: no network), "as_original", or a network
        object as a create takes it. ``from_snapshot`` starts from the
        failure snapshot's files. Returns the new task (``replay_of`` set);
        wait for it with wait_task.
        """
        body: dict = {}
        if new_id is not None:
            body["id"] = new_id
        if network is not None:
            body["network"] = network
        if from_snapshot:
            body["from_snapshot"] = True
        if timeout is not None:
            body["timeout"] = _duration(timeout)
        return TaskInfo.from_json(self._json(
            "POST", f"/v1/tasks/{quote(task_id, safe='')}/replay", body=body))

    def task_output(self, task_id: str, index: int) -> bytes:
        """The bytes of output ``index`` of a finished task (checked against
        the daemon's sha256, as download_task_output checks them)."""
        return self._task_output(task_id, index, None)[1] or b""

    def download_task_output(self, task_id: str, index: int, fileobj: BinaryIO) -> int:
        """Streams output ``index`` into ``fileobj``; returns its size."""
        return self._task_output(task_id, index, fileobj)[0]

    def _task_output(self, task_id: str, index: int,
                     fileobj: Optional[BinaryIO]) -> "tuple[int, Optional[bytes]]":
        resp = self._open("GET", f"/v1/tasks/{quote(task_id, safe='')}/outputs/{int(index)}",
                          headers={"Accept": "application/octet-stream"})
        try:
            expected = resp.resp.getheader("X-Corral-Sha256")
            if not expected:
                # The daemon always sends the stored hash; without it the bytes
                # cannot be checked (as the C++ SDK, docs/cpp-sdk.md).
                raise CorralError(0, "bad_response",
                                  f"output {index} of task {task_id}: the answer has no "
                                  "X-Corral-Sha256 to check the bytes against")
            digest = hashlib.sha256()
            got = _copy_body(resp.resp, fileobj, f"output {index} of task {task_id}", digest)
        finally:
            resp.close()
        if digest.hexdigest() != expected.lower():
            raise CorralError(0, "bad_response",
                              f"output {index} of task {task_id}: sha256 {digest.hexdigest()} "
                              f"differs from the stored {expected}")
        return got

    def health(self) -> dict:
        """GET /healthz: {"status": "ok", "sandboxes": N}."""
        return self._json("GET", "/healthz")


class Sandbox:
    """A handle on one sandbox. As a context manager it is destroyed on exit."""

    def __init__(self, client: Client, info: SandboxInfo):
        self.client = client
        self.id = info.id
        self.last_info = info

    def __repr__(self) -> str:
        return f"Sandbox({self.id!r}, state={self.last_info.state!r})"

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.destroy()
        except (NotFound, SandboxExpired):
            pass
        except CorralError as e:
            if exc_type is None:
                raise
            # Do not hide the exception that is already on its way.
            warnings.warn(f"corral: destroying sandbox {self.id} failed: {e}", RuntimeWarning,
                          stacklevel=2)

    @property
    def _path(self) -> str:
        return f"/v1/sandboxes/{quote(self.id, safe='')}"

    # ---- lifecycle ----

    def info(self) -> SandboxInfo:
        """The sandbox's current state, spec and usage."""
        self.last_info = SandboxInfo.from_json(self.client._json("GET", self._path))
        return self.last_info

    def extend(self, seconds: Optional[Duration] = None, max_lifetime: Optional[Duration] = None) -> SandboxInfo:
        """Adds ``seconds`` to the expiry, or sets a new ``max_lifetime`` from now."""
        if (seconds is None) == (max_lifetime is None):
            raise ValueError("give exactly one of seconds and max_lifetime")
        body = {"extend_by": _duration(seconds)} if seconds is not None else \
            {"max_lifetime": _duration(max_lifetime)}
        self.last_info = SandboxInfo.from_json(self.client._json("POST", self._path + "/timeout", body=body))
        return self.last_info

    def set_network(self, **policy: Any) -> SandboxInfo:
        """Replaces the sandbox's network policy while it runs (docs/network.md).

        Takes the fields of the create's ``network`` object, for example
        ``set_network(mode="allowlist", allow=["pypi.org"])``. New
        connections follow it at once; open ones it no longer allows are
        closed. A sandbox created without network cannot be given one
        (CorralError with code "conflict").
        """
        self.last_info = SandboxInfo.from_json(
            self.client._json("PUT", self._path + "/network", body=dict(policy)))
        return self.last_info

    def destroy(self) -> SandboxInfo:
        """Destroys the sandbox (idempotent) and returns its final info."""
        self.last_info = SandboxInfo.from_json(self.client._json("DELETE", self._path))
        return self.last_info

    # ---- exec ----

    def exec(self, cmd: Union[str, Iterable[str]], env: Optional[dict] = None,
             cwd: Optional[str] = None, stdin: Union[str, bytes, None] = None,
             timeout: Optional[Duration] = None, max_output_bytes: Optional[int] = None) -> ExecResult:
        """Runs a command and waits for it.

        ``cmd`` is a shell line (run by /bin/sh -c) or an argv list. A
        timed-out command is a result (``timed_out``), not an exception.
        """
        body = _exec_body(cmd, env, cwd, stdin, timeout, max_output_bytes)
        doc = self.client._json("POST", self._path + "/exec", body=body,
                                timeout=self.client._long_timeout(_seconds(timeout)))
        return ExecResult.from_json(doc)

    def exec_stream(self, cmd: Union[str, Iterable[str]], env: Optional[dict] = None,
                    cwd: Optional[str] = None, stdin: Union[str, bytes, None] = None,
                    timeout: Optional[Duration] = None) -> Iterator[tuple]:
        """Runs a command and yields its output as it comes.

        Yields ("stdout", bytes), ("stderr", bytes), then one ("exit",
        ExecResult) whose stdout/stderr are empty (they were yielded).
        Closing the generator early ends the command.
        """
        body = _exec_body(cmd, env, cwd, stdin, timeout)
        body["stream"] = "ndjson"
        r = self.client._open("POST", self._path + "/exec", body=body,
                              headers={"Accept": "application/x-ndjson"},
                              timeout=self.client._long_timeout(_seconds(timeout)))
        try:
            pending = b""
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line.decode("utf-8"))
                    except (ValueError, UnicodeDecodeError) as e:
                        raise CorralError(0, "bad_response", f"bad stream event: {e}") from e
                    kind = event.get("type")
                    if kind in ("stdout", "stderr"):
                        if event.get("data_b64") is not None:
                            data = base64.b64decode(event["data_b64"])
                        else:
                            data = str(event.get("data", "")).encode("utf-8")
                        yield (kind, data)
                    elif kind == "exit":
                        yield ("exit", ExecResult.from_json(event))
                        return
                    elif kind == "error":
                        raise error_from_body(0, event.get("error") or {})
            raise ConnectionFailed(0, "connection_failed", "the exec stream ended without an exit event")
        finally:
            r.close()

    # ---- background processes ----

    def start(self, cmd: Union[str, Iterable[str]], env: Optional[dict] = None,
              cwd: Optional[str] = None, stdin: Union[str, bytes, None] = None,
              timeout: Optional[Duration] = None) -> "Process":
        """Starts a background process; it outlives this request."""
        body = _exec_body(cmd, env, cwd, stdin, timeout)
        doc = self.client._json("POST", self._path + "/processes", body=body)
        return Process(self, ProcessInfo.from_json(doc))

    def processes(self) -> "list[Process]":
        """The sandbox's processes (background ones and running execs)."""
        doc = self.client._json("GET", self._path + "/processes")
        return [Process(self, ProcessInfo.from_json(d)) for d in doc.get("processes", [])]

    def process(self, process_id: str) -> "Process":
        """The process with this id; raises NotFound when there is none."""
        doc = self.client._json("GET", f"{self._path}/processes/{quote(process_id, safe='')}")
        return Process(self, ProcessInfo.from_json(doc))

    # ---- files ----

    def put_file(self, path: str, data: Any, mode: Optional[int] = None) -> dict:
        """Writes a file, streamed; returns {"path", "bytes", "sha256"}.

        ``data`` is bytes, str (UTF-8), a binary file object (read in
        chunks, never whole) or an iterable of bytes chunks. ``mode`` is
        the file mode (e.g. 0o755).
        """
        query = {"path": path, "mode": format(mode, "o") if mode is not None else None}
        headers = {"Content-Type": "application/octet-stream"}
        if isinstance(data, str):
            body: Any = data.encode("utf-8")
        elif isinstance(data, (bytes, bytearray, memoryview)):
            body = bytes(data)
        elif hasattr(data, "read"):
            size = _regular_file_size(data)
            if size is not None:
                headers["Content-Length"] = str(size)
            body = _file_chunks(data, size)
        else:
            body = _iter_chunks(data)
        return self.client._json("PUT", self._path + "/files", query=query, body=body, headers=headers)

    def download(self, path: str, fileobj: BinaryIO) -> int:
        """Streams a file into ``fileobj``; returns the byte count."""
        r = self.client._open("GET", self._path + "/files", query={"path": path},
                              headers={"Accept": "application/octet-stream"})
        try:
            return _copy_body(r.resp, fileobj, f"downloading {path}")[0]
        finally:
            r.close()

    def get_file(self, path: str) -> bytes:
        """A file's content."""
        r = self.client._open("GET", self._path + "/files", query={"path": path},
                              headers={"Accept": "application/octet-stream"})
        try:
            return _copy_body(r.resp, None, f"downloading {path}")[1] or b""
        finally:
            r.close()

    def list_files(self, path: str) -> "list[FileEntry]":
        """The entries of a directory."""
        doc = self.client._json("GET", self._path + "/files/list", query={"path": path})
        return [FileEntry.from_json(d) for d in doc.get("entries", [])]

    def stat(self, path: str) -> FileEntry:
        """One file's type, size, mode and mtime (symlinks not followed)."""
        return FileEntry.from_json(self.client._json("GET", self._path + "/files/stat", query={"path": path}))

    def exists(self, path: str) -> bool:
        """True when the path exists."""
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def mkdir(self, path: str, parents: bool = False, mode: Optional[int] = None) -> None:
        """Creates a directory (with ``parents=True`` also the missing parents)."""
        body: dict = {"path": path, "parents": parents}
        if mode is not None:
            body["mode"] = mode
        self.client._json("POST", self._path + "/files/mkdir", body=body)

    def remove(self, path: str, recursive: bool = False) -> None:
        """Deletes a file, or a directory (non-empty only with ``recursive``)."""
        self.client._json("DELETE", self._path + "/files",
                          query={"path": path, "recursive": True if recursive else None})

    def rename(self, src: str, dst: str, overwrite: bool = False) -> None:
        """Renames ``src`` to ``dst`` (refused if ``dst`` exists, unless ``overwrite``)."""
        self.client._json("POST", self._path + "/files/rename",
                          body={"from": src, "to": dst, "overwrite": overwrite})


class Process:
    """A background process in a sandbox."""

    def __init__(self, sandbox: Sandbox, info: ProcessInfo):
        self.sandbox = sandbox
        self.id = info.id
        self.last_info = info

    def __repr__(self) -> str:
        return f"Process({self.id!r}, state={self.last_info.state!r})"

    @property
    def _path(self) -> str:
        return f"{self.sandbox._path}/processes/{quote(self.id, safe='')}"

    @property
    def _client(self) -> Client:
        return self.sandbox.client

    def info(self) -> ProcessInfo:
        """The process's state, exit status and output sizes so far."""
        self.last_info = ProcessInfo.from_json(self._client._json("GET", self._path))
        return self.last_info

    def output(self, stream: str = "stdout", offset: int = 0, follow: bool = False) -> Iterator[bytes]:
        """Yields the output from byte ``offset`` on, in chunks.

        With ``follow=True`` it keeps yielding until the process has ended.
        """
        if stream not in ("stdout", "stderr"):
            raise ValueError("stream is 'stdout' or 'stderr'")
        r = self._client._open("GET", self._path + "/output",
                               query={"stream": stream, "offset": offset, "follow": True if follow else None},
                               headers={"Accept": "application/octet-stream"},
                               timeout=None if follow else _UNSET)
        try:
            while True:
                chunk = r.read1(_CHUNK)
                if not chunk:
                    return
                yield chunk
        finally:
            r.close()

    def read_output(self, stream: str = "stdout", offset: int = 0) -> bytes:
        """The output written so far, from ``offset`` on."""
        return b"".join(self.output(stream, offset))

    def write_stdin(self, data: Union[str, bytes], close: bool = False) -> int:
        """Writes to the process's stdin (``close=True`` then closes it)."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        doc = self._client._json("POST", self._path + "/stdin", query={"close": True if close else None},
                                 body=bytes(data), headers={"Content-Type": "application/octet-stream"})
        return int(doc.get("written", 0))

    def signal(self, sig: Union[int, str]) -> ProcessInfo:
        """Sends a signal: a number, or a name such as "TERM" or "SIGKILL"."""
        self.last_info = ProcessInfo.from_json(
            self._client._json("POST", self._path + "/signal", body={"signal": sig}))
        return self.last_info

    def kill(self) -> ProcessInfo:
        """Sends SIGKILL."""
        return self.signal("KILL")

    def wait(self, timeout: Optional[float] = None) -> ProcessInfo:
        """Waits for the process to end; raises RequestTimeout after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = 60.0 if deadline is None else max(0.0, min(60.0, deadline - time.monotonic()))
            try:
                doc = self._client._json("POST", self._path + "/wait", query={"timeout": f"{step:.3f}"},
                                         timeout=self._client._long_timeout(step))
            except RequestTimeout:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                continue
            self.last_info = ProcessInfo.from_json(doc)
            return self.last_info


__all__ = ["Client", "Sandbox", "Process", "DEFAULT_URL"]
