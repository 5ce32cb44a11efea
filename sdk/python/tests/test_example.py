"""Runs examples/agent_loop.py against the test daemon so it keeps working."""

import os
import subprocess
import sys

from conftest import SDK_DIR

EXAMPLE = os.path.join(SDK_DIR, "..", "..", "examples", "agent_loop.py")


def _run_example(env_extra, args=()):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **env_extra)
    env.pop("PYTHONPATH", None)  # the example finds the SDK by itself
    return subprocess.run([sys.executable, EXAMPLE, *args], env=env, capture_output=True,
                          timeout=180, text=True)


def test_agent_loop_example(daemon, unix_client):
    before = {s.id for s in unix_client.list()}
    p = _run_example({"CORRAL_URL": daemon.unix_url})
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "analysed 200 values" in out
    assert "result: count=200, sum=10036, mean=50.18, median=50.0" in out, out
    for i in range(1, 6):
        assert f"    | step {i}/5: working\n" in out
    assert "all done" in p.stderr
    assert "destroyed" in out
    assert {s.id for s in unix_client.list()} == before  # nothing left behind


def test_agent_loop_example_over_tcp(daemon):
    p = _run_example({"CORRAL_API_KEY": daemon.api_key}, ["--url", daemon.tcp_url])
    assert p.returncode == 0, p.stdout + p.stderr
    p = _run_example({}, ["--url", daemon.tcp_url, "--api-key", "wrong"])
    assert p.returncode == 2 and "unauthorized" in p.stderr
