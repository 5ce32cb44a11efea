"""The Python SDK against a real daemon (see conftest.py)."""

import hashlib
import io
import os
import tempfile
import time

import pytest

import corral
from conftest import wait_until


# ---- the five calls, over both transports -------------------------------------

def test_five_calls(client):
    sb = client.create(memory="256Mi", pids=64, max_lifetime=120)
    try:
        assert sb.id
        assert sb.last_info.state in ("ready", "running")
        assert sb.id in [s.id for s in client.list()]
        assert client.get(sb.id).last_info.spec["limits"]["memory_bytes"] == 256 * 1024 * 1024

        result = sb.exec("echo hello; echo oops >&2; exit 3")
        assert result.exit_code == 3
        assert result.stdout == b"hello\n"
        assert result.stderr == b"oops\n"
        assert not result.timed_out

        up = sb.put_file("/workspace/greeting.txt", b"hi there\n")
        assert up["bytes"] == 9
        assert up["sha256"] == hashlib.sha256(b"hi there\n").hexdigest()
        assert sb.exec(["cat", "/workspace/greeting.txt"]).stdout == b"hi there\n"

        sb.exec("printf 'made inside' > /workspace/out.txt")
        assert sb.get_file("/workspace/out.txt") == b"made inside"
    finally:
        final = sb.destroy()
    assert final.state == "cleaned"
    assert final.residue == []
    assert sb.id not in [s.id for s in client.list()]
    # DELETE is idempotent.
    assert sb.destroy().state == "cleaned"


# ---- exec ---------------------------------------------------------------------

def test_exec_options(sandbox):
    r = sandbox.exec(["/bin/sh", "-c", 'echo "$GREETING from $(pwd)"'], env={"GREETING": "hey"}, cwd="/workspace")
    assert r.ok and r.stdout == b"hey from /workspace\n"
    r = sandbox.exec("tr a-z A-Z", stdin="shout\n")
    assert r.stdout == b"SHOUT\n"
    # Bytes that are not UTF-8 survive both ways (stdin_b64 / stdout_b64).
    blob = bytes(range(256))
    r = sandbox.exec("cat", stdin=blob)
    assert r.stdout == blob
    r = sandbox.exec("head -c 100000 /dev/zero", max_output_bytes=1000)
    assert r.stdout == b"\0" * 1000 and r.stdout_truncated


def test_exec_timeout_is_a_result(sandbox):
    start = time.monotonic()
    r = sandbox.exec("sleep 30", timeout=1)
    assert time.monotonic() - start < 15
    assert r.timed_out
    assert r.exit_code == 124 or r.signal is not None


def test_exec_stream_yields_before_the_end(sandbox):
    start = time.monotonic()
    events = []
    for kind, data in sandbox.exec_stream("echo a; sleep 2; echo b >&2; echo c"):
        events.append((time.monotonic() - start, kind, data))
    first_at, kind, data = events[0]
    exit_at, exit_kind, result = events[-1]
    assert (kind, data) == ("stdout", b"a\n")
    assert exit_kind == "exit" and result.exit_code == 0
    assert exit_at >= 1.9
    assert first_at < exit_at - 1.5, events
    out = b"".join(d for _, k, d in events if k == "stdout")
    err = b"".join(d for _, k, d in events if k == "stderr")
    assert out == b"a\nc\n" and err == b"b\n"


def test_exec_stream_closed_early_ends_the_command(sandbox):
    stream = sandbox.exec_stream("echo started; sleep 30; touch /workspace/not-killed")
    assert next(stream) == ("stdout", b"started\n")
    # Close once the daemon knows the process runs: a disconnect before
    # that is lost (a daemon race, reported separately).
    assert wait_until(lambda: any(p.last_info.state == "running" for p in sandbox.processes()), 10)
    stream.close()
    # The exec lives only as long as its request: it is gone soon.
    assert wait_until(lambda: not any(p.last_info.running for p in sandbox.processes()), 10), sandbox.processes()
    assert not sandbox.exists("/workspace/not-killed")


# ---- background processes -------------------------------------------------------

def test_background_process_runs_on_and_follows_from_an_offset(sandbox):
    start = time.monotonic()
    proc = sandbox.start("for i in 1 2 3 4 5 6; do echo line$i; sleep 0.4; done")
    assert time.monotonic() - start < 2.0  # the request returned while it runs
    assert proc.id.startswith("p-")
    assert proc.info().running
    assert wait_until(lambda: proc.info().stdout_bytes >= 12, 10)  # line1, line2
    head = proc.read_output()
    assert head.startswith(b"line1\nline2\n")
    assert proc.info().running
    # Follow from where we are: the rest arrives, and the stream ends with it.
    tail = b"".join(proc.output(offset=len(head), follow=True))
    expected = b"".join(b"line%d\n" % i for i in range(1, 7))
    assert head + tail == expected
    info = proc.wait(timeout=10)
    assert info.state == "exited" and info.exit_code == 0
    assert info.stdout_bytes == len(expected)
    # The output stays readable after the end, from any offset.
    assert proc.read_output(offset=6) == expected[6:]
    assert proc.read_output("stderr") == b""


def test_process_stdin(sandbox):
    proc = sandbox.start("while read line; do echo got:$line; done; echo eof")
    assert proc.write_stdin("one\n") == 4
    assert proc.write_stdin(b"two\n", close=True) == 4
    info = proc.wait(timeout=10)
    assert info.exit_code == 0
    assert proc.read_output() == b"got:one\ngot:two\neof\n"
    with pytest.raises(corral.Conflict):
        proc.write_stdin("late\n")


def test_process_signal_and_wait(sandbox):
    proc = sandbox.start(["sleep", "60"])
    with pytest.raises(corral.RequestTimeout):
        proc.wait(timeout=0.5)
    assert proc.info().running
    proc.signal("TERM")
    start = time.monotonic()
    info = proc.wait(timeout=10)
    assert time.monotonic() - start < 5
    assert info.state == "exited"
    assert info.signal == 15 and info.exit_code is None
    assert proc.id in [p.id for p in sandbox.processes()]
    assert sandbox.process(proc.id).last_info.signal == 15


# ---- files --------------------------------------------------------------------

def test_file_operations(sandbox):
    sandbox.mkdir("/workspace/work/a/b", parents=True)
    with pytest.raises(corral.NotFound):
        sandbox.mkdir("/workspace/nope/x")
    sandbox.put_file("/workspace/work/a/b/data.txt", "text\n")
    sandbox.put_file("/workspace/work/run.sh", b"#!/bin/sh\necho ran\n", mode=0o755)
    assert sandbox.exec("/workspace/work/run.sh").stdout == b"ran\n"
    names = {e.name: e for e in sandbox.list_files("/workspace/work")}
    assert set(names) == {"a", "run.sh"}
    assert names["a"].is_dir and names["run.sh"].type == "file"
    st = sandbox.stat("/workspace/work/a/b/data.txt")
    assert st.type == "file" and st.size == 5
    assert sandbox.stat("/workspace/work/run.sh").mode & 0o777 == 0o755
    sandbox.rename("/workspace/work/a/b/data.txt", "/workspace/work/moved.txt")
    assert not sandbox.exists("/workspace/work/a/b/data.txt")
    assert sandbox.get_file("/workspace/work/moved.txt") == b"text\n"
    with pytest.raises(corral.CorralError):
        sandbox.remove("/workspace/work/a")  # not empty
    sandbox.remove("/workspace/work/a", recursive=True)
    sandbox.remove("/workspace/work/moved.txt")
    assert [e.name for e in sandbox.list_files("/workspace/work")] == ["run.sh"]


def test_upload_from_iterable_and_unsized_file(sandbox):
    parts = [b"abc", b"", b"def" * 1000]
    r = sandbox.put_file("/workspace/chunks.bin", iter(parts))  # sent chunked
    assert r["bytes"] == 3003
    assert sandbox.get_file("/workspace/chunks.bin") == b"".join(parts)
    r = sandbox.put_file("/workspace/bytesio.bin", io.BytesIO(b"x" * 5000))  # no fileno: chunked
    assert r["bytes"] == 5000
    assert sandbox.stat("/workspace/bytesio.bin").size == 5000


class _CountingReader:
    """A file object that records the largest read asked of it."""

    def __init__(self, f):
        self.f = f
        self.largest = 0

    def read(self, n=-1):
        self.largest = max(self.largest, n if n >= 0 else 1 << 62)
        return self.f.read(n)

    def fileno(self):
        return self.f.fileno()

    def tell(self):
        return self.f.tell()


def test_64mib_round_trip(unix_client):
    size = 64 * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="corral-sdk-") as tmp:
        src = os.path.join(tmp, "src.bin")
        h = hashlib.sha256()
        with open(src, "wb") as f:
            for _ in range(size // (1 << 20)):
                chunk = os.urandom(1 << 20)
                h.update(chunk)
                f.write(chunk)
        digest = h.hexdigest()
        with unix_client.create(disk="512Mi", max_lifetime=300) as sb:
            with open(src, "rb") as f:
                reader = _CountingReader(f)
                r = sb.put_file("/workspace/big.bin", reader)
            assert reader.largest <= 1 << 20  # streamed, never read whole
            assert r["bytes"] == size and r["sha256"] == digest
            assert sb.exec("sha256sum /workspace/big.bin").stdout.split()[0].decode() == digest
            dst = os.path.join(tmp, "dst.bin")
            with open(dst, "wb") as f:
                assert sb.download("/workspace/big.bin", f) == size
            h2 = hashlib.sha256()
            with open(dst, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h2.update(chunk)
            assert h2.hexdigest() == digest


def test_upload_over_the_disk_limit_is_insufficient_storage(unix_client):
    with unix_client.create(disk="8Mi", max_lifetime=120) as sb:
        chunks = (b"z" * (1 << 20) for _ in range(32))
        with pytest.raises(corral.InsufficientStorage) as e:
            sb.put_file("/workspace/too-big.bin", chunks)
        assert e.value.status == 507
        # The space was given back: the sandbox takes files again.
        assert sb.put_file("/workspace/small.txt", b"ok")["bytes"] == 2
        assert sb.exec("cat /workspace/small.txt").stdout == b"ok"


# ---- lifecycle ----------------------------------------------------------------

def test_context_manager_destroys_on_exception(unix_client):
    with pytest.raises(RuntimeError, match="boom"):
        with unix_client.create(max_lifetime=120) as sb:
            sid = sb.id
            assert sb.exec("true").ok
            raise RuntimeError("boom")
    assert unix_client.get(sid).last_info.state == "cleaned"
    assert sid not in [s.id for s in unix_client.list()]
    with pytest.raises(corral.Conflict):
        sb.exec("true")


def test_context_manager_destroys_on_normal_exit(unix_client):
    with unix_client.create(max_lifetime=120) as sb:
        pass
    assert unix_client.get(sb.id).last_info.state == "cleaned"


def test_extend_and_info(sandbox):
    before = sandbox.info()
    assert before.state in ("ready", "running") and before.expires_at_ms
    after = sandbox.extend(60)
    assert after.expires_at_ms == before.expires_at_ms + 60000
    assert sandbox.extend(max_lifetime=30).expires_at_ms < after.expires_at_ms


def test_network_is_none_by_default_and_cannot_be_added_later(sandbox):
    assert sandbox.info().network is None
    with pytest.raises(corral.CorralError) as refused:
        sandbox.set_network(mode="allowlist", allow=["pypi.org"])
    assert refused.value.code == "conflict"
    with pytest.raises(corral.CorralError) as bad:
        sandbox.set_network(allow=["ftp://x.test"])
    assert bad.value.code == "invalid_value" and bad.value.field == "allow[0]"


def test_idempotency_key(unix_client):
    with unix_client.create(max_lifetime=120, idempotency_key="sdk-test-key-1") as a:
        b = unix_client.create(max_lifetime=120, idempotency_key="sdk-test-key-1")
        assert b.id == a.id


# ---- errors -------------------------------------------------------------------

def test_unknown_sandbox_is_not_found(client):
    with pytest.raises(corral.NotFound) as e:
        client.get("sb-0000000000000000")
    assert e.value.status == 404 and e.value.code == "not_found"


def test_bad_key_is_unauthorized(daemon):
    bad = corral.Client(daemon.tcp_url, api_key="not-the-key")
    with pytest.raises(corral.Unauthorized) as e:
        bad.list()
    assert e.value.status == 401
    with pytest.raises(corral.Unauthorized):
        corral.Client(daemon.tcp_url, api_key="").list()  # no key at all


def test_request_errors_map_to_exceptions(sandbox, unix_client):
    with pytest.raises(corral.BadRequest) as e:
        unix_client.create(image="Not An Image")
    assert e.value.code == "invalid_value" and e.value.field == "image"
    with pytest.raises(corral.BadRequest):
        sandbox.exec([])
    with pytest.raises(corral.NotFound):
        sandbox.get_file("/workspace/does-not-exist")
    with pytest.raises(corral.NotFound):
        sandbox.process("p-0000000000000000").info()
    with pytest.raises(corral.BadRequest) as e:
        sandbox.get_file("/proc/1/environ")  # a kernel file system: out of the file API's reach
    assert e.value.code == "path_escape"
    sandbox.put_file("/workspace/a", b"a")
    sandbox.put_file("/workspace/b", b"b")
    with pytest.raises(corral.Conflict):
        sandbox.rename("/workspace/a", "/workspace/b")
    sandbox.rename("/workspace/a", "/workspace/b", overwrite=True)
    assert sandbox.get_file("/workspace/b") == b"a"


def test_unreachable_daemon_is_connection_failed(daemon):
    c = corral.Client("unix:" + daemon.tmp + "/no-such.sock")
    with pytest.raises(corral.ConnectionFailed):
        c.list()


def test_env_configuration(daemon, monkeypatch):
    monkeypatch.setenv("CORRAL_URL", daemon.tcp_url)
    monkeypatch.setenv("CORRAL_API_KEY", daemon.api_key)
    c = corral.Client()
    assert c.url == daemon.tcp_url
    assert isinstance(c.list(), list)


def test_secret_file_code_is_forbidden():
    # The file API's refusal of corral's own secret files (/run/secrets).
    e = corral.errors.error_from_body(403, {"code": "secret_file", "message": "m"})
    assert isinstance(e, corral.Forbidden) and e.code == "secret_file" and e.status == 403
    assert isinstance(corral.errors.error_from_body(403, {"code": "new_code", "message": "m"}),
                      corral.Forbidden)
