"""Tasks through the Python SDK (issue 15 point 10; D6) against a real daemon."""

import hashlib
import io
import uuid

import pytest

import corral


def _id(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def test_run_task_with_inputs_and_outputs(client):
    data = bytes(range(256)) * 64
    task = client.run_task(
        _id("py-run"),
        "wc -c < /workspace/in.bin > /workspace/out.txt; cat /workspace/note.txt >> /workspace/out.txt",
        inputs={"/workspace/in.bin": data, "/workspace/note.txt": "note\n"},
        outputs=["/workspace/out.txt"],
        timeout="60s",
        wait_timeout=120,
    )
    assert task.ok, task
    assert task.exit_code == 0
    assert task.finished_at_ms and task.created_at_ms and task.finished_at_ms >= task.created_at_ms
    out = task.outputs[0]
    body = client.task_output(task.id, 0)
    assert body == b"16384\nnote\n"
    assert out.present and out.size == len(body)
    assert out.sha256 == hashlib.sha256(body).hexdigest()
    buf = io.BytesIO()
    assert client.download_task_output(task.id, 0, buf) == len(body)


def test_repeat_returns_the_stored_task_and_other_body_conflicts(unix_client):
    task_id = _id("py-idem")
    first = unix_client.run_task(task_id, ["sh", "-c", "echo once"], wait_timeout=120)
    again = unix_client.submit_task(task_id, ["sh", "-c", "echo once"])
    assert again.status == first.status
    assert again.attempt == first.attempt == 1
    assert again.finished_at_ms == first.finished_at_ms
    with pytest.raises(corral.Conflict) as err:
        unix_client.submit_task(task_id, ["sh", "-c", "echo twice"])
    assert "command" in str(err.value)


def test_a_submit_with_wait_returns_the_finished_task(unix_client):
    task_id = _id("py-wait")
    task = unix_client.submit_task(task_id, "echo done", wait=30)
    assert task.finished and task.ok, task
    slow = unix_client.submit_task(_id("py-wait-slow"), "sleep 2", wait="200ms")
    assert not slow.finished, slow
    assert unix_client.wait_task(slow.id, 60).ok


def test_failed_task_says_why(unix_client):
    task = unix_client.run_task(_id("py-fail"), "exit 3", outputs=["/workspace/none"],
                                wait_timeout=120)
    assert task.status == "failed"
    assert task.exit_code == 3
    assert task.reason


def test_list_pages_through_every_task(unix_client):
    ids = {unix_client.submit_task(_id("py-ls"), "true").id for _ in range(3)}
    for task_id in ids:
        unix_client.wait_task(task_id, 120)
    listed = [t.id for t in unix_client.list_tasks(limit=None)]
    assert ids <= set(listed)
    assert len(listed) == len(set(listed))


def test_cancel_ends_a_running_task(unix_client):
    task_id = _id("py-cancel")
    unix_client.submit_task(task_id, "sleep 300", timeout="10m")
    unix_client.cancel_task(task_id)
    task = unix_client.wait_task(task_id, 120)
    assert task.status == "cancelled"


def test_unknown_task_is_not_found(unix_client):
    with pytest.raises(corral.NotFound):
        unix_client.get_task(_id("py-none"))


def test_replay_runs_a_failed_task_again_from_its_kept_inputs(unix_client):
    task_id = _id("py-replay")
    data = bytes(range(256)) * 4
    first = unix_client.run_task(task_id, "sha256sum /workspace/in.bin > /workspace/sum; exit 5",
                                 inputs={"/workspace/in.bin": data},
                                 outputs=[{"path": "/workspace/sum", "required": False}],
                                 wait_timeout=120)
    assert first.status == "failed" and first.exit_code == 5, first
    assert first.resolved["inputs"][0]["sha256"] == hashlib.sha256(data).hexdigest()
    new_id = _id("py-replayed")
    replay = unix_client.replay_task(task_id, new_id=new_id)
    assert replay.id == new_id and replay.replay_of == task_id
    assert unix_client.replay_task(task_id, new_id=new_id).id == new_id  # idempotent
    done = unix_client.wait_task(new_id, 120)
    assert done.status == "failed" and done.exit_code == 5, done
    assert unix_client.task_output(new_id, 0) == unix_client.task_output(task_id, 0)
    with pytest.raises(corral.Conflict):
        unix_client.replay_task(task_id, new_id=new_id, network="as_original")
    with pytest.raises(corral.NotFound):
        unix_client.replay_task(_id("py-none"))


def _serve_output(headers, body):
    """A loopback HTTP server that answers every GET with ``body`` and
    ``headers`` (a daemon that lost or changed the hash); returns its URL."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize("headers", [{}, {"X-Corral-Sha256": hashlib.sha256(b"other").hexdigest()}])
def test_an_output_without_its_hash_or_with_another_is_refused(headers):
    server, url = _serve_output(headers, b"the bytes")
    try:
        c = corral.Client(url, api_key="crl_test_" + "0" * 32)
        with pytest.raises(corral.CorralError) as e:
            c.task_output("t", 0)
        assert e.value.code == "bad_response"
    finally:
        server.shutdown()


def test_bytes_travel_raw_and_are_one_task_with_their_base64_form(unix_client):
    """Bytes inputs and stdin go as parts of a multipart body (no base64);
    the same request sent as JSON with content_b64 is the same task (D6)."""
    import base64
    data = b"--corral-\r\n\r\n" + bytes(range(256)) * 512 + b"\r\n--"
    task_id = _id("py-raw")
    sh = "cat /workspace/in.bin > /workspace/out.bin; cat >> /workspace/out.bin"
    task = unix_client.run_task(task_id, sh, inputs={"/workspace/in.bin": data},
                                stdin=b"\x00\r\nend", outputs=["/workspace/out.bin"],
                                wait_timeout=120)
    assert task.ok, task
    assert unix_client.task_output(task_id, 0) == data + b"\x00\r\nend"
    again = unix_client.submit_task(
        task_id, sh,
        inputs={"/workspace/in.bin": {"content_b64": base64.b64encode(data).decode()}},
        stdin_b64=base64.b64encode(b"\x00\r\nend").decode(),
        outputs=["/workspace/out.bin"])
    assert again.attempt == 1 and again.finished_at_ms == task.finished_at_ms
    with pytest.raises(corral.Conflict) as err:
        unix_client.submit_task(task_id, sh, inputs={"/workspace/in.bin": data[:-1]},
                                stdin=b"\x00\r\nend", outputs=["/workspace/out.bin"])
    assert "inputs[0].content" in str(err.value)


@pytest.mark.parametrize("headers", [{}, {"X-Corral-Sha256": ""}])
def test_a_download_without_a_hash_to_check_writes_nothing(headers):
    """A missing or empty X-Corral-Sha256 is refused before a byte reaches
    the caller's file (the bytes cannot be checked), naming the header."""
    import io

    server, url = _serve_output(headers, b"the bytes")
    try:
        c = corral.Client(url, api_key="crl_test_" + "0" * 32)
        sink = io.BytesIO()
        with pytest.raises(corral.CorralError) as e:
            c.download_task_output("t", 0, sink)
        assert e.value.code == "bad_response"
        assert "X-Corral-Sha256" in str(e.value)
        assert sink.getvalue() == b""
    finally:
        server.shutdown()
