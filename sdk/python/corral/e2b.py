"""A client of any service that speaks E2B's public protocol (E2B's cloud
through a TLS endpoint, or corral's own E2B facade), with the calls of
``corral.Client`` that the protocol can carry, so that business code
switches back-ends by configuration (``corral.connect``).

    import corral
    client = corral.connect()            # CORRAL_BACKEND=e2b: E2B_API_KEY, and E2B_DOMAIN
                                         # or E2B_API_URL + E2B_SANDBOX_URL
    with client.create(env={"STAGE": "dev"}) as sb:
        print(sb.exec("echo hi").text)

Standard library only: the control plane is JSON over HTTP, envd is the
Connect protocol with its JSON codec (docs/e2b.md).
"""

import base64
import http.client
import json
import os
import re
import ssl
import struct
import time
import uuid
from typing import Any, Iterable, Optional, Union
from urllib.parse import quote, urlsplit

from .errors import CorralError, BadRequest, Forbidden, NotFound, Unauthorized, Unavailable
from .models import ExecResult

_SIGNALS = {"killed": 9, "terminated": 15, "interrupt": 2, "hangup": 1, "aborted": 6,
            "segmentation fault": 11}


def _error(status: int, body: bytes) -> CorralError:
    try:
        doc = json.loads(body)
        message = doc.get("message") if isinstance(doc, dict) else None
    except ValueError:
        message = None
    message = message or body[:500].decode("utf-8", "replace") or f"HTTP {status}"
    cls = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
           502: Unavailable, 503: Unavailable}.get(status, CorralError)
    code = {400: "invalid_value", 401: "unauthorized", 403: "forbidden", 404: "not_found",
            502: "unavailable", 503: "unavailable"}.get(status, "internal")
    return cls(status, code, message)


class _Base:
    def __init__(self, url: str, what: str, tls: Optional[ssl.SSLContext] = None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{what} must be http(s)://host[:port][/prefix], not {url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        self.tls = tls

    def connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


# E2B's own clouds route envd by the sandbox header on one host.
_E2B_OWN_DOMAINS = ("e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev")
_HOST_AND_PORT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(?::[0-9]{1,5})?")
_HOST_LABEL = re.compile(r"[A-Za-z0-9-]{1,56}")


def envd_url(sandbox_id: str, domain: str, sandbox_url: Optional[str] = None) -> str:
    """Where envd of one sandbox answers, by the rules of E2B's SDKs:
    ``sandbox_url`` when set; https://sandbox.<domain> for E2B's own
    domains; otherwise https://49983-<id>.<domain>. A domain or id that
    cannot be part of a host name is a ValueError (a service's answer
    cannot steer requests elsewhere)."""
    if sandbox_url:
        return sandbox_url.rstrip("/")
    if not _HOST_AND_PORT.fullmatch(domain or "") or ".." in domain:
        raise ValueError(f"{domain!r} is not a domain (host[:port]): set E2B_DOMAIN or E2B_SANDBOX_URL")
    if domain in _E2B_OWN_DOMAINS:
        return f"https://sandbox.{domain}"
    if not _HOST_LABEL.fullmatch(sandbox_id or ""):
        raise ValueError(f"sandbox id {sandbox_id!r} cannot be part of a host name")
    return f"https://49983-{sandbox_id}.{domain}"


class E2bClient:
    """A connection to an E2B-compatible service, as E2B's SDKs configure
    it: E2B_API_KEY, and either E2B_DOMAIN (default e2b.app: the control
    plane at https://api.<domain>, each sandbox's envd at its own host) or
    E2B_API_URL and E2B_SANDBOX_URL (one envd URL for every sandbox, as
    corral's facade serves it). ``ca_file`` (or SSL_CERT_FILE) trusts a
    private CA."""

    def __init__(self, api_url: Optional[str] = None, sandbox_url: Optional[str] = None,
                 api_key: Optional[str] = None, template: str = "base",
                 timeout: Optional[float] = 120.0, domain: Optional[str] = None,
                 ca_file: Optional[str] = None):
        self.domain = domain or os.environ.get("E2B_DOMAIN") or "e2b.app"
        api_url = api_url or os.environ.get("E2B_API_URL") or f"https://api.{self.domain}"
        self.sandbox_url = sandbox_url or os.environ.get("E2B_SANDBOX_URL")
        self.api_key = api_key or os.environ.get("E2B_API_KEY")
        if not self.api_key:
            raise ValueError("the E2B back-end needs an API key (E2B_API_KEY)")
        ca_file = ca_file or os.environ.get("SSL_CERT_FILE")
        self._tls = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self._api = _Base(api_url, "E2B_API_URL", self._tls)
        if self.sandbox_url:
            _Base(self.sandbox_url, "E2B_SANDBOX_URL")
        else:
            envd_url("probe", self.domain)  # a bad domain fails here, not at the first call
        self.template = template
        self.timeout = timeout

    def _envd_for(self, sandbox_id: str, domain: Optional[str]) -> _Base:
        return _Base(envd_url(sandbox_id, domain or self.domain, self.sandbox_url), "the envd URL", self._tls)

    def __repr__(self) -> str:
        return f"E2bClient({self._api.host!r})"

    def _control(self, method: str, path: str, body: Any = None) -> Any:
        conn = self._api.connection(self.timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"X-API-Key": self.api_key}
            if data is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, self._api.prefix + path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            if resp.status // 100 != 2:
                raise _error(resp.status, raw)
            return json.loads(raw) if raw else None
        finally:
            conn.close()

    def create(self, image: Optional[str] = None, env: Optional[dict] = None,
               metadata: Optional[dict] = None, max_lifetime: Optional[int] = None,
               network: Union[str, list, None] = None, **unsupported: Any) -> "E2bSandbox":
        """Creates a sandbox from ``image`` (an E2B template; default the
        client's). ``network``: "none", "open", or a list of allowed hosts."""
        if unsupported:
            raise BadRequest(400, "invalid_value", "the E2B protocol cannot carry " + ", ".join(sorted(unsupported)))
        body: dict = {"templateID": image or self.template}
        if env:
            body["envVars"] = {str(k): str(v) for k, v in env.items()}
        if metadata:
            body["metadata"] = {str(k): str(v) for k, v in metadata.items()}
        if max_lifetime is not None:
            body["timeout"] = int(max_lifetime)
        if network == "none":
            body["allow_internet_access"] = False
        elif network == "open":
            body["allow_internet_access"] = True
        elif isinstance(network, (list, tuple)):
            body["network"] = {"allowOut": list(network)}
        doc = self._control("POST", "/v2/sandboxes", body)
        return E2bSandbox(self, doc["sandboxID"], doc.get("envdAccessToken"), doc.get("domain"))

    def get(self, sandbox_id: str) -> "E2bSandbox":
        doc = self._control("GET", "/sandboxes/" + quote(sandbox_id, safe=""))
        return E2bSandbox(self, doc["sandboxID"], doc.get("envdAccessToken"), doc.get("domain"))

    def list(self) -> "list[E2bSandbox]":
        docs = self._control("GET", "/v2/sandboxes?limit=1000") or []
        return [E2bSandbox(self, d["sandboxID"], None, d.get("domain")) for d in docs]


class E2bSandbox:
    """One sandbox of an E2B-compatible service."""

    def __init__(self, client: E2bClient, sandbox_id: str, token: Optional[str],
                 domain: Optional[str] = None):
        self.client = client
        self.id = sandbox_id
        self._token = token
        self._envd = client._envd_for(sandbox_id, domain if isinstance(domain, str) else None)

    def __repr__(self) -> str:
        return f"E2bSandbox({self.id!r})"

    def __enter__(self) -> "E2bSandbox":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.destroy()
        except NotFound:
            pass

    def _headers(self, content_type: Optional[str] = None) -> dict:
        if self._token is None:
            self._token = self.client.get(self.id)._token or ""
        h = {"E2b-Sandbox-Id": self.id, "E2b-Sandbox-Port": "49983", "Connect-Protocol-Version": "1"}
        if self._token:
            h["X-Access-Token"] = self._token
        if content_type:
            h["Content-Type"] = content_type
        return h

    def _unary(self, method: str, message: dict) -> dict:
        conn = self._envd.connection(self.client.timeout)
        try:
            conn.request("POST", self._envd.prefix + "/process.Process/" + method,
                         body=json.dumps(message).encode(), headers=self._headers("application/json"))
            resp = conn.getresponse()
            raw = resp.read()
            if resp.status != 200:
                raise _error(resp.status, raw)
            return json.loads(raw or b"{}")
        finally:
            conn.close()

    def destroy(self) -> None:
        self.client._control("DELETE", "/sandboxes/" + quote(self.id, safe=""))

    def exec(self, cmd: Union[str, Iterable[str]], env: Optional[dict] = None,
             cwd: Optional[str] = None, stdin: Union[str, bytes, None] = None,
             timeout: Optional[float] = None) -> ExecResult:
        """Runs a command and waits for it (a shell line runs under /bin/sh -c)."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
        process: dict = {"cmd": argv[0], "args": argv[1:]}
        if env:
            process["envs"] = {str(k): str(v) for k, v in env.items()}
        if cwd:
            process["cwd"] = cwd
        data = stdin.encode() if isinstance(stdin, str) else stdin
        message = json.dumps({"process": process, "stdin": bool(data)}).encode()
        headers = self._headers("application/connect+json")
        if timeout is not None:
            headers["Connect-Timeout-Ms"] = str(int(timeout * 1000))
        started = time.monotonic()
        conn = self._envd.connection(None if timeout is None else timeout + 60)
        result = ExecResult()
        try:
            conn.request("POST", self._envd.prefix + "/process.Process/Start",
                         body=struct.pack(">BI", 0, len(message)) + message, headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                raise _error(resp.status, resp.read())
            out, err = [], []
            while True:
                head = resp.read(5)
                if len(head) < 5:
                    raise Unavailable(0, "unavailable", "the process's stream ended without its end")
                flags, length = struct.unpack(">BI", head)
                doc = json.loads(resp.read(length) or b"{}")
                if flags & 2:
                    if doc.get("error"):
                        raise _error(400, json.dumps(doc["error"]).encode())
                    break
                event = doc.get("event", {})
                if "start" in event:
                    result.process_id = str(event["start"].get("pid", ""))
                    if data:
                        pid = event["start"]["pid"]
                        self._unary("SendInput", {"process": {"pid": pid},
                                                  "input": {"stdin": base64.b64encode(data).decode()}})
                        self._unary("CloseStdin", {"process": {"pid": pid}})
                elif "data" in event:
                    d = event["data"]
                    if "stdout" in d:
                        out.append(base64.b64decode(d["stdout"]))
                    elif "stderr" in d:
                        err.append(base64.b64decode(d["stderr"]))
                elif "end" in event:
                    end = event["end"]
                    if end.get("exited"):
                        result.exit_code = int(end.get("exitCode", 0))
                    else:
                        status = end.get("status", "")
                        name = status[len("signal: "):] if status.startswith("signal: ") else ""
                        result.signal = _SIGNALS.get(name, 9)
            result.stdout = b"".join(out)
            result.stderr = b"".join(err)
        finally:
            conn.close()
        result.duration_ms = int((time.monotonic() - started) * 1000)
        return result

    def put_file(self, path: str, data: Union[str, bytes]) -> dict:
        """Writes a file (parents are made); returns {"path", "bytes"}."""
        blob = data.encode() if isinstance(data, str) else bytes(data)
        boundary = "corral-" + uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{path}\"\r\n"
                f"Content-Type: application/octet-stream\r\n\r\n").encode() + blob + f"\r\n--{boundary}--\r\n".encode()
        conn = self._envd.connection(self.client.timeout)
        try:
            conn.request("POST", self._envd.prefix + "/files?path=" + quote(path, safe=""), body=body,
                         headers=self._headers(f"multipart/form-data; boundary={boundary}"))
            resp = conn.getresponse()
            raw = resp.read()
            if resp.status != 200:
                raise _error(resp.status, raw)
        finally:
            conn.close()
        return {"path": path, "bytes": len(blob)}

    def get_file(self, path: str) -> bytes:
        conn = self._envd.connection(self.client.timeout)
        try:
            conn.request("GET", self._envd.prefix + "/files?path=" + quote(path, safe=""),
                         headers=self._headers())
            resp = conn.getresponse()
            raw = resp.read()
            if resp.status != 200:
                raise _error(resp.status, raw)
            return raw
        finally:
            conn.close()


def connect(backend: Optional[str] = None, **options: Any):
    """The client of the back-end the configuration names: ``backend`` or
    CORRAL_BACKEND, "corral" (default: corral's own API, ``Client``) or
    "e2b" (an E2B-compatible service, ``E2bClient``). Both have
    ``create()``, and their sandboxes ``exec()``, ``put_file()``,
    ``get_file()`` and ``destroy()``."""
    backend = backend or os.environ.get("CORRAL_BACKEND") or "corral"
    if backend == "e2b":
        return E2bClient(**options)
    if backend == "corral":
        from .client import Client
        return Client(**options)
    raise ValueError(f"CORRAL_BACKEND must be corral or e2b, not {backend!r}")
