"""corral.connect(): the same business code against corral's own API and
against corral's E2B facade (REQUIREMENTS P2; issue 17), chosen by
CORRAL_BACKEND alone."""

import os

import pytest

import corral


def business(client):
    """Code that knows nothing of the back-end behind `client`."""
    with client.create(env={"STAGE": "prod"}, max_lifetime=120) as sb:
        r = sb.exec("echo stage=$STAGE; echo warn >&2; exit 4")
        assert r.exit_code == 4
        assert r.stdout == b"stage=prod\n"
        assert r.stderr == b"warn\n"
        blob = os.urandom(300_000)
        sb.put_file("/tmp/blob", blob)
        assert sb.get_file("/tmp/blob") == blob
        assert sb.exec(["cat"], stdin="piped").stdout == b"piped"
        killed = sb.exec("kill -9 $$")
        assert killed.exit_code is None and killed.signal == 9


def test_the_same_code_runs_on_both_back_ends(daemon, monkeypatch):
    monkeypatch.setenv("CORRAL_BACKEND", "corral")
    monkeypatch.setenv("CORRAL_URL", daemon.unix_url)
    first = corral.connect()
    assert isinstance(first, corral.Client)
    business(first)

    monkeypatch.setenv("CORRAL_BACKEND", "e2b")
    monkeypatch.setenv("E2B_API_URL", daemon.tcp_url + "/e2b")
    monkeypatch.setenv("E2B_SANDBOX_URL", daemon.tcp_url + "/e2b/envd")
    monkeypatch.setenv("E2B_API_KEY", "e2b_" + daemon.api_key[len("crl_"):])
    second = corral.connect()
    assert isinstance(second, corral.E2bClient)
    business(second)


def test_e2b_back_end_errors(daemon):
    client = corral.E2bClient(daemon.tcp_url + "/e2b", daemon.tcp_url + "/e2b/envd", daemon.api_key)
    sb = client.create()
    with pytest.raises(corral.NotFound):
        sb.get_file("/tmp/nothing-here")
    sb.destroy()
    with pytest.raises(corral.NotFound):
        sb.destroy()
    with pytest.raises(corral.Unavailable):
        sb.exec("true")
    wrong = corral.E2bClient(daemon.tcp_url + "/e2b", daemon.tcp_url + "/e2b/envd", "e2b_" + "0" * 64)
    with pytest.raises(corral.Unauthorized):
        wrong.create()
    with pytest.raises(ValueError):
        corral.connect("nope")
