"""`quotaflow serve` behind its guard (streams/http_guard.py), on a real socket: where it binds,
the bearer token, read-only, bounds on request size and on requests at once, malformed requests,
TLS with client certificates, and a burst of 1,000 concurrent requests served."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from typer.main import get_command

from projections.server import ProjectionServer
from streams.cli.main import app
from streams.http_guard import GuardError, HttpGuard, _Gate
from streams.log import Topics
from streams.log.sqlite import SqliteLog

pytestmark = pytest.mark.timeout(120, func_only=True)

TOKEN = "s3cret-token-of-32-characters-xx"
TOPICS = Topics("quotaflow.events", "quotaflow.decisions", "quotaflow.snapshots")


async def serving(tmp_path: Path, guard: HttpGuard) -> ProjectionServer:
    log = SqliteLog(tmp_path / "log.db")
    await log.start()
    await log.ensure_topics(TOPICS.specs(), single_partition=[TOPICS.input, TOPICS.decisions])
    server = ProjectionServer(log, TOPICS, guard=guard)
    await server.start(port=0)
    return server


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[ProjectionServer]:
    server = await serving(tmp_path, HttpGuard(token=TOKEN))
    yield server
    await server.stop()
    await server.log.close()


def url(server: ProjectionServer, path: str) -> str:
    return f"http://127.0.0.1:{server.port}{path}"


def raw_request(port: int, data: bytes) -> bytes:
    """Send bytes as they are and read what comes back."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(data)
        out = b""
        while chunk := conn.recv(65536):
            out += chunk
        return out


def test_serve_binds_loopback_unless_told_otherwise() -> None:
    serve = get_command(app).commands["serve"]  # type: ignore[attr-defined]
    assert next(p for p in serve.params if p.name == "host").default == "127.0.0.1"
    agent = get_command(app).commands["agent"]  # type: ignore[attr-defined]
    assert next(p for p in agent.params if p.name == "http_host").default == "127.0.0.1"
    assert HttpGuard().host == "127.0.0.1"


async def test_the_default_guard_listens_on_loopback_only(tmp_path: Path) -> None:
    server = await serving(tmp_path, HttpGuard())
    try:
        assert server._runner is not None
        (address,) = {s.getsockname()[0] for site in server._runner.sites for s in site._server.sockets}  # type: ignore[union-attr]
        assert address == "127.0.0.1"
        async with aiohttp.ClientSession() as http, http.get(url(server, "/health")) as response:
            assert response.status == 200  # no token set: open, on loopback
    finally:
        await server.stop()
        await server.log.close()


async def test_a_wide_bind_needs_a_token_or_client_certificates_or_an_explicit_insecure(tmp_path: Path) -> None:
    with pytest.raises(GuardError, match="refusing to serve on 0.0.0.0 without authentication"):
        await ProjectionServer(SqliteLog(tmp_path / "never.db"), TOPICS, guard=HttpGuard(host="0.0.0.0")).start(port=0)
    assert not (tmp_path / "never.db").exists()  # refused before anything started
    HttpGuard(host="0.0.0.0", token=TOKEN).check()
    HttpGuard(host="::", insecure=True).check()
    HttpGuard(host="::1").check()
    with pytest.raises(GuardError, match="at least 16 characters"):
        HttpGuard(token="short").check()

    from typer.testing import CliRunner

    refused = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--broker", f"sqlite:///{tmp_path / 'x.db'}"], env={"QUOTAFLOW_HTTP_TOKEN": ""})
    assert refused.exit_code == 2 and "refusing to serve on 0.0.0.0" in refused.output


async def test_every_request_needs_the_token_when_one_is_set(guarded: ProjectionServer) -> None:
    async with aiohttp.ClientSession() as http:
        for path in ("/health", "/status", "/metrics", "/clusterqueues", "/workloads/a/b", "/no/such/path"):
            async with http.get(url(guarded, path)) as response:
                assert response.status == 401, path
                assert response.headers["WWW-Authenticate"].startswith("Bearer")
                assert (await response.json())["reason"] == "Unauthorized"
            async with http.get(url(guarded, path), headers={"Authorization": f"Bearer {TOKEN[:-1]}y"}) as response:
                assert response.status == 401, path
            async with http.get(url(guarded, path), headers={"Authorization": TOKEN}) as response:
                assert response.status == 401, path  # the scheme is part of it
        for path, status in (("/health", 200), ("/clusterqueues", 200), ("/metrics", 200), ("/workloads/a/b", 404)):
            async with http.get(url(guarded, path), headers={"Authorization": f"Bearer {TOKEN}"}) as response:
                assert response.status == status, path


async def test_read_only_and_bounded_requests(guarded: ProjectionServer, caplog: pytest.LogCaptureFixture) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as http:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            async with http.request(method, url(guarded, "/clusterqueues"), headers=auth) as response:
                assert response.status == 405, method
        async with http.get(url(guarded, "/clusterqueues"), headers=auth, data=b"x" * 2_000_000) as response:
            assert response.status == 413
        async with http.get(url(guarded, "/clusterqueues"), headers={**auth, "X-Big": "y" * 20_000}) as response:
            assert response.status in (400, 431)
        async with http.get(url(guarded, "/clusterqueues?q=" + "z" * 20_000), headers=auth) as response:
            assert response.status in (400, 414)

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(3):
                yield b"chunk"

        async with http.get(url(guarded, "/clusterqueues"), headers=auth, data=chunks()) as response:
            assert response.status == 413  # a body of unannounced length: still a body
    assert guarded.port is not None
    for garbage in (b"NOT HTTP AT ALL\r\n\r\n", b"GET /health HTTP/9.9\r\n\r\n", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 64,
                    b"GET /health HTTP/1.1\r\nContent-Length: -5\r\n\r\n"):
        answer = await asyncio.to_thread(raw_request, guarded.port, garbage)
        assert answer.startswith(b"HTTP/1.") and answer.split()[1] == b"400", (garbage, answer[:200])
    # refused without a traceback in the logs for each (anyone who can connect could fill them)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    # ... and the server still serves
    async with aiohttp.ClientSession() as http, http.get(url(guarded, "/health"), headers=auth) as response:
        assert response.status == 200


async def test_a_thousand_concurrent_requests_from_localhost_are_all_served(guarded: ProjectionServer) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    connector = aiohttp.TCPConnector(limit=0, force_close=True)  # 1,000 connections at once
    started = time.monotonic()
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as http:

        async def one(i: int) -> int:
            path = ("/clusterqueues", "/status", "/metrics", "/health")[i % 4]
            async with http.get(url(guarded, path), headers=auth) as response:
                await response.read()
                return response.status

        statuses = await asyncio.gather(*(one(i) for i in range(1000)))
    elapsed = time.monotonic() - started
    assert statuses == [200] * 1000
    assert elapsed < 60, f"1,000 requests took {elapsed:.1f}s"


async def test_past_the_bound_requests_wait_and_then_are_turned_away() -> None:
    gate = _Gate(in_flight=1, queued=1, timeout=0.5)
    assert await gate.enter()  # handled
    waiting = asyncio.create_task(gate.enter())  # waits its turn
    await asyncio.sleep(0)
    assert not await gate.enter()  # no room to wait either: 503 at once
    gate.leave()
    assert await waiting  # its turn came
    gate.leave()
    slow = _Gate(in_flight=1, queued=5, timeout=0.05)
    assert await slow.enter()
    assert not await slow.enter()  # waited past the timeout: 503
    slow.leave()
    assert await slow.enter()  # the one that gave up left no trace


def _certificates(tmp: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, with openssl."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")  # quick to make
    run("req", "-x509", *ec, "-nodes", "-days", "1", "-subj", "/CN=test-ca", "-keyout", "ca.key", "-out", "ca.crt")
    (tmp / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name in ("server", "client"):
        run("req", *ec, "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
            "-out", f"{name}.crt", *(["-extfile", "san.ext"] if name == "server" else []))
    return {n: tmp / n for n in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")}


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make certificates")
async def test_tls_with_client_certificates(tmp_path: Path) -> None:
    certs = _certificates(tmp_path)
    guard = HttpGuard(host="0.0.0.0", tls_cert=certs["server.crt"], tls_key=certs["server.key"], tls_client_ca=certs["ca.crt"])
    guard.check()  # client certificates are authentication enough for a wide bind
    server = await serving(tmp_path, guard)
    try:
        base = f"https://127.0.0.1:{server.port}/health"
        with_cert = ssl.create_default_context(cafile=str(certs["ca.crt"]))
        with_cert.load_cert_chain(certs["client.crt"], certs["client.key"])
        async with aiohttp.ClientSession() as http:
            async with http.get(base, ssl=with_cert) as response:
                assert response.status == 200
            without = ssl.create_default_context(cafile=str(certs["ca.crt"]))
            with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
                async with http.get(base, ssl=without) as response:
                    await response.read()
    finally:
        await server.stop()
        await server.log.close()


async def test_the_dashboards_live_stream_does_not_take_a_request_slot(tmp_path: Path) -> None:
    server = await serving(tmp_path, HttpGuard(token=TOKEN, max_in_flight=1, max_queued=0, queue_timeout=0.1))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(url(server, "/api/stream")) as refused:
                assert refused.status == 401  # the token still holds for it
            stream = await http.get(url(server, "/api/stream"), headers=auth)
            try:
                assert stream.status == 200 and stream.headers["Content-Type"] == "text/event-stream"
                assert (await asyncio.wait_for(stream.content.readline(), 10)).startswith(b"retry:")  # open, and stays open
                for _ in range(3):  # the one slot is still free for everything else
                    async with http.get(url(server, "/health"), headers=auth) as response:
                        assert response.status == 200
            finally:
                stream.close()
    finally:
        await server.stop()
        await server.log.close()


async def test_the_dashboard_trades_the_token_in_its_url_for_a_cookie(guarded: ProjectionServer) -> None:
    # unsafe: keep cookies from an IP address, as browsers do (aiohttp's jar does not by default)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(url(guarded, "/?token=wrong-token-of-enough-length"), allow_redirects=False) as wrong:
            assert wrong.status == 401 and "quotaflow_token" not in wrong.cookies
        async with http.get(url(guarded, "/api/overview")) as before:
            assert before.status == 401
        async with http.get(url(guarded, f"/?token={TOKEN}"), allow_redirects=False) as login:
            assert login.status == 303 and login.headers["Location"] == "/"
            cookie = login.cookies["quotaflow_token"]
            assert cookie.value == TOKEN and cookie["httponly"] and cookie["samesite"] == "Strict"
        async with http.get(url(guarded, "/api/overview")) as after:  # the session sends the cookie
            assert after.status == 200
    async with aiohttp.ClientSession(cookies={"quotaflow_token": "not-the-token-at-all-xx"}) as http:
        async with http.get(url(guarded, "/api/overview")) as forged:
            assert forged.status == 401
