"""Runs the tests against a real `corral serve` on a temp data dir and socket.

The daemon binary comes from CORRAL_BIN (default /work/main/build/corral).
At the end every sandbox is destroyed, the daemon gets SIGTERM and the temp
dir is removed.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

SDK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if SDK_DIR not in sys.path:
    sys.path.insert(0, SDK_DIR)

import corral  # noqa: E402

CORRAL_BIN = os.environ.get("CORRAL_BIN", "/work/main/build/corral")


class Daemon:
    def __init__(self, tmp, socket_path, port, api_key, proc, output):
        self.tmp = tmp
        self.socket_path = socket_path
        self.port = port
        self.api_key = api_key
        self.proc = proc
        self.output = output  # lines printed so far (kept draining)

    @property
    def unix_url(self):
        return "unix:" + self.socket_path

    @property
    def tcp_url(self):
        return f"http://127.0.0.1:{self.port}"


def _start_daemon():
    if not os.access(CORRAL_BIN, os.X_OK):
        pytest.fail(f"no corral binary at {CORRAL_BIN} (set CORRAL_BIN)")
    tmp = tempfile.mkdtemp(prefix="corral-pytest-")
    os.chmod(tmp, 0o755)
    data_dir = os.path.join(tmp, "data")
    socket_path = os.path.join(tmp, "corral.sock")
    proc = subprocess.Popen(
        [CORRAL_BIN, "serve", "--data-dir", data_dir, "--socket", socket_path,
         "--listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = []
    found = threading.Event()
    port = []

    def drain():
        # Reads every line (so the daemon never blocks on a full pipe).
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            output.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m and not found.is_set():
                port.append(int(m.group(1)))
                found.set()
        found.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    if not found.wait(60) or not port:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail("corral serve did not start:\n" + "\n".join(output))
    with open(os.path.join(data_dir, "api-key")) as f:
        api_key = f.readline().strip()
    return Daemon(tmp, socket_path, port[0], api_key, proc, output)


def _stop_daemon(d):
    leftovers = []
    try:
        client = corral.Client(d.unix_url, timeout=60)
        for sb in client.list():
            if sb.last_info.state != "cleaned":
                leftovers.append(sb.id)
                try:
                    sb.destroy()
                except corral.CorralError:
                    pass
    finally:
        d.proc.send_signal(signal.SIGTERM)
        try:
            d.proc.wait(30)
        except subprocess.TimeoutExpired:
            d.proc.kill()
            d.proc.wait()
        shutil.rmtree(d.tmp, ignore_errors=True)
    return leftovers


@pytest.fixture(scope="session")
def daemon():
    d = _start_daemon()
    yield d
    _stop_daemon(d)


@pytest.fixture(scope="session")
def unix_client(daemon):
    return corral.Client(daemon.unix_url, timeout=60)


@pytest.fixture(scope="session")
def tcp_client(daemon):
    return corral.Client(daemon.tcp_url, api_key=daemon.api_key, timeout=60)


@pytest.fixture(params=["unix", "tcp"])
def client(request, daemon):
    """Both transports: the unix socket (no key) and TCP with the API key."""
    if request.param == "unix":
        return corral.Client(daemon.unix_url, timeout=60)
    return corral.Client(daemon.tcp_url, api_key=daemon.api_key, timeout=60)


@pytest.fixture
def sandbox(unix_client):
    """A fresh sandbox, destroyed after the test."""
    sb = unix_client.create(max_lifetime=300)
    try:
        yield sb
    finally:
        try:
            sb.destroy()
        except corral.NotFound:
            pass


def wait_until(predicate, timeout=10.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
