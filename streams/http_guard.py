"""What stands in front of quotaflow's read-only HTTP endpoints: `quotaflow serve` (the views and
/metrics, projections/server.py) and the agent's /health and /status (streams/agent/process.py).

Both are aiohttp servers, so one set of rules, as aiohttp middleware and site options:

- **Where it listens.** 127.0.0.1 unless told otherwise. A non-loopback address is refused
  unless requests must carry a bearer token or a client certificate (mTLS), or the operator says
  `insecure` explicitly (`--insecure-bind`, `QUOTAFLOW_HTTP_INSECURE=1`): someone who can reach
  the port could otherwise read every queue, workload and metric.
- **Read-only.** GET and HEAD only (405 otherwise); nothing served changes anything.
- **Bearer token** (`QUOTAFLOW_HTTP_TOKEN`, or `QUOTAFLOW_HTTP_TOKEN_FILE` for a mounted
  Secret): when set, every request without `Authorization: Bearer <token>` gets 401, the token
  compared in constant time (`hmac.compare_digest`). A browser cannot add that header, so the
  dashboard is opened once as `/?token=TOKEN`: the guard answers with an HttpOnly, SameSite=Strict
  cookie holding the token (Secure under TLS) and a redirect to `/`, and accepts the cookie as it
  accepts the header.
- **TLS / mTLS** (`--tls-cert`/`--tls-key`, `--tls-client-ca` to require client certificates):
  Python's `ssl`, which aiohttp serves directly.
- **Bounds.** A request may carry no body (these are GET endpoints): one that announces more than
  `max_body` bytes gets 413 before anything is read. The request line and each header are capped
  by aiohttp's parser (`max_line_size`, `max_field_size`: 400 past them); unparseable requests get
  400 from the parser. At most `max_in_flight` requests are handled at once, up to `max_queued`
  more wait (at most `queue_timeout` seconds) for their turn, and any beyond get 503 with
  `Retry-After` -- so a burst is served, and a flood costs bounded memory.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from streams.settings import DEFAULT_HTTP_HOST as DEFAULT_HOST
from streams.settings import ENV_HTTP_INSECURE as ENV_INSECURE
from streams.settings import ENV_HTTP_TLS_CERT as ENV_TLS_CERT
from streams.settings import ENV_HTTP_TLS_CLIENT_CA as ENV_TLS_CLIENT_CA
from streams.settings import ENV_HTTP_TLS_KEY as ENV_TLS_KEY
from streams.settings import ENV_HTTP_TOKEN as ENV_TOKEN
from streams.settings import ENV_HTTP_TOKEN_FILE as ENV_TOKEN_FILE

# A GET needs no body; a little is tolerated for clients that send an empty JSON object.
DEFAULT_MAX_BODY = 1024
DEFAULT_MAX_LINE = 8190  # request line (path and query), aiohttp's own default
DEFAULT_MAX_FIELD = 8190  # one header
DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_MAX_QUEUED = 4096
DEFAULT_QUEUE_TIMEOUT = 10.0
COOKIE = "quotaflow_token"  # the dashboard's copy of the bearer token (see `guard`)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class GuardError(ValueError):
    """A setting that would serve the endpoints unsafely, or cannot be used."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class HttpGuard:
    host: str = DEFAULT_HOST
    token: str | None = None
    insecure: bool = False  # bind a non-loopback address with neither token nor mTLS
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None  # require client certificates signed by this CA (mTLS)
    max_body: int = DEFAULT_MAX_BODY
    max_line: int = DEFAULT_MAX_LINE
    max_field: int = DEFAULT_MAX_FIELD
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    max_queued: int = DEFAULT_MAX_QUEUED
    queue_timeout: float = DEFAULT_QUEUE_TIMEOUT
    # Paths answered without the token: the agent's /health, for Kubernetes probes, which carry
    # no credentials (it tells only the agent's role).
    open_paths: tuple[str, ...] = ()
    # Paths that stay open as long as the client listens (the dashboard's server-sent events):
    # outside the bound on requests at once, which they would hold forever; they keep their own
    # (projections/dashboard/live.py turns away pages past its limit with 503).
    streaming_paths: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: Any) -> HttpGuard:
        """Settings from the environment; `given` (command-line options that were set) win."""
        env = os.environ if environ is None else environ
        token = env.get(ENV_TOKEN) or None
        token_file = env.get(ENV_TOKEN_FILE)
        if token is None and token_file:
            try:
                token = Path(token_file).read_text().strip() or None
            except OSError as exc:
                raise GuardError(f"{ENV_TOKEN_FILE}={token_file}: {exc.strerror or exc}") from None
            if token is None:
                raise GuardError(f"{ENV_TOKEN_FILE}={token_file} is empty")

        def path(name: str) -> Path | None:
            return Path(env[name]) if env.get(name) else None

        found: dict[str, Any] = {
            "token": token,
            "insecure": _truthy(env.get(ENV_INSECURE)),
            "tls_cert": path(ENV_TLS_CERT),
            "tls_key": path(ENV_TLS_KEY),
            "tls_client_ca": path(ENV_TLS_CLIENT_CA),
        }
        found.update({k: v for k, v in given.items() if v is not None and v is not False})
        return cls(**found)

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert is not None else "http"

    def check(self) -> None:
        """Raise GuardError where these settings would serve unsafely or cannot work."""
        if self.token is not None and (len(self.token) < 16 or any(c.isspace() for c in self.token)):
            raise GuardError(f"{ENV_TOKEN}: a token must be at least 16 characters, without spaces")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise GuardError("TLS needs both a certificate and its key (--tls-cert and --tls-key)")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise GuardError("client certificates (--tls-client-ca) need TLS: give --tls-cert and --tls-key too")
        authenticated = self.token is not None or self.tls_client_ca is not None
        if not is_loopback(self.host) and not authenticated and not self.insecure:
            raise GuardError(
                f"refusing to serve on {self.host} without authentication: anyone who can reach it could read "
                f"every queue and workload. Set {ENV_TOKEN} (or {ENV_TOKEN_FILE}), or require client "
                f"certificates (--tls-client-ca), or say --insecure-bind ({ENV_INSECURE}=1) to do it anyway"
            )

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.tls_cert is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.tls_cert, self.tls_key)
            if self.tls_client_ca is not None:
                context.load_verify_locations(cafile=str(self.tls_client_ca))
                context.verify_mode = ssl.CERT_REQUIRED
        except (OSError, ssl.SSLError) as exc:
            raise GuardError(f"TLS: {exc}") from None
        return context

    # -- the server ----------------------------------------------------------------------------
    def middlewares(self) -> list[Any]:
        expected = f"Bearer {self.token}".encode() if self.token is not None else None
        gate = _Gate(self.max_in_flight, self.max_queued, self.queue_timeout)

        def matches(token: str | None) -> bool:
            given = f"Bearer {token}".encode("utf-8", "surrogateescape") if token is not None else b""
            return expected is not None and hmac.compare_digest(given, expected)

        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            if expected is not None and request.path not in self.open_paths:
                header = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
                if request.path == "/" and "token" in request.query and request.method == "GET":
                    # A browser cannot send a bearer header: the dashboard is opened once as
                    # /?token=..., which trades the token for a cookie and drops it from the URL.
                    if not matches(request.query["token"]):
                        return _problem(401, "Unauthorized", "wrong token", {"WWW-Authenticate": 'Bearer realm="quotaflow"'})
                    response = web.HTTPSeeOther("/")
                    response.set_cookie(COOKIE, request.query["token"], path="/", httponly=True,
                                        samesite="Strict", secure=self.tls_cert is not None)
                    return response
                if not (hmac.compare_digest(header, expected) or matches(request.cookies.get(COOKIE))):
                    return _problem(401, "Unauthorized", "a bearer token is required", {"WWW-Authenticate": 'Bearer realm="quotaflow"'})
            if request.method not in ("GET", "HEAD"):
                return _problem(405, "MethodNotAllowed", "read-only: GET and HEAD only", {"Allow": "GET, HEAD"})
            length = request.content_length
            if (length is not None and length > self.max_body) or (length is None and request.body_exists):
                return _problem(413, "RequestEntityTooLarge", f"these endpoints take no request body (at most {self.max_body} bytes)")
            if request.path in self.streaming_paths:
                return await handler(request)
            if not await gate.enter():
                return _problem(503, "ServiceUnavailable", "too many requests at once; retry", {"Retry-After": "1"})
            try:
                return await handler(request)
            finally:
                gate.leave()

        return [guard]

    def application(self, **kwargs: Any) -> web.Application:
        return web.Application(middlewares=self.middlewares(), client_max_size=max(self.max_body, 1), **kwargs)

    def runner(self, app: web.Application) -> web.AppRunner:
        return web.AppRunner(
            app,
            access_log=None,
            logger=_SERVER_LOG,
            max_line_size=self.max_line,
            max_field_size=self.max_field,
        )

    async def start(self, runner: web.AppRunner, port: int) -> int:
        """Check the settings, bind, and return the bound port."""
        self.check()
        await runner.setup()
        site = web.TCPSite(runner, self.host, port, ssl_context=self.ssl_context(), backlog=max(128, min(self.max_in_flight + self.max_queued, 4096)))
        await site.start()
        server: Any = site._server
        sockets = server.sockets if server is not None else []
        return int(sockets[0].getsockname()[1]) if sockets else port


class _ClientErrors(logging.Filter):
    """A request the parser refused (not HTTP, too long, malformed) is answered 400 and is the
    client's mistake: aiohttp would log each with a traceback at ERROR, which lets anyone who can
    connect fill the logs. Dropped; the server's own errors still get through."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, HttpProcessingError)


_SERVER_LOG = logging.getLogger("quotaflow.http")
_SERVER_LOG.addFilter(_ClientErrors())


class _Gate:
    """At most `in_flight` requests inside, up to `queued` more waiting (for `timeout` s)."""

    def __init__(self, in_flight: int, queued: int, timeout: float) -> None:
        self._slots = asyncio.Semaphore(in_flight)
        self._room = in_flight + queued
        self._timeout = timeout
        self._present = 0

    async def enter(self) -> bool:
        if self._present >= self._room:
            return False
        self._present += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), self._timeout)
        except TimeoutError:
            self._present -= 1
            return False
        except BaseException:
            self._present -= 1
            raise
        return True

    def leave(self) -> None:
        self._slots.release()
        self._present -= 1


def _problem(status: int, reason: str, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    """An error as Kubernetes' `Status` (the shape the views' 404s have)."""
    return web.json_response(
        {"kind": "Status", "status": "Failure", "reason": reason, "message": message, "code": status},
        status=status,
        headers=headers,
    )
