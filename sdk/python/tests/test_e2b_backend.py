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


@pytest.fixture
def tls_front(daemon, tmp_path, monkeypatch):
    """corral's facade behind https, laid out as a hosted service
    (tests/npm/tls_front.js): api.sbx.localhost and 49983-<id>.sbx.localhost.
    The names are made to resolve to loopback for this test's process only
    (libcurl does that itself for *.localhost; Python asks the system)."""
    import shutil
    import socket
    import subprocess

    node, openssl = shutil.which("node"), shutil.which("openssl")
    if not node or not openssl:
        if os.environ.get("CORRAL_MUST_WORK") == "1":
            pytest.fail("node and openssl are needed (scripts/install-deps)")
        pytest.skip("node or openssl is missing")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-days", "2", "-subj", "/CN=corral test front",
                    "-addext", "subjectAltName=DNS:api.sbx.localhost,DNS:*.sbx.localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    script = os.path.join(os.path.dirname(__file__), "../../../tests/npm/tls_front.js")
    proc = subprocess.Popen([node, script, str(cert), str(key), daemon.tcp_url, "sbx.localhost"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    assert line.startswith("PORT "), line
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".sbx.localhost"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    yield {"domain": "sbx.localhost:" + line.split()[1], "ca_file": str(cert)}
    proc.stdin.close()
    proc.wait(timeout=30)


def test_a_hosted_service_over_https_by_its_domain_alone(daemon, tls_front, monkeypatch):
    for name in ("E2B_API_URL", "E2B_SANDBOX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CORRAL_BACKEND", "e2b")
    monkeypatch.setenv("E2B_DOMAIN", tls_front["domain"])
    monkeypatch.setenv("SSL_CERT_FILE", tls_front["ca_file"])
    monkeypatch.setenv("E2B_API_KEY", daemon.api_key)
    client = corral.connect()
    assert client._api.host == "api.sbx.localhost"
    business(client)


def test_an_untrusted_certificate_is_refused(daemon, tls_front):
    import ssl
    client = corral.E2bClient(api_key=daemon.api_key, domain=tls_front["domain"])
    with pytest.raises(ssl.SSLError):
        client.create()


def test_envd_urls_follow_the_sdks_rules():
    from corral.e2b import envd_url
    assert envd_url("abc", "e2b.app") == "https://sandbox.e2b.app"
    assert envd_url("abc", "corral.example.com") == "https://49983-abc.corral.example.com"
    assert envd_url("abc", "x", "http://127.0.0.1:7070/e2b/envd/") == "http://127.0.0.1:7070/e2b/envd"
    for domain in ("evil.example/x", "a@b.example", "b.example?x", "b.example:", ".b.example",
                   "b..example", "b example", "b.example\r\nX: 1", ""):
        with pytest.raises(ValueError):
            envd_url("abc", domain)
    for sandbox_id in ("", "a/b", "a.b", "a@b", "a b"):
        with pytest.raises(ValueError):
            envd_url(sandbox_id, "corral.example.com")
