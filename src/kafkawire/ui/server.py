"""The console's HTTP side (aiohttp, on the broker's or proxy's own event loop).

Routes: ``/`` and ``/static/*`` (the front end, package data), ``/api/exchanges`` (the recent pairs),
``/api/exchanges/{id}`` (both frames as hex with the annotator's byte ranges per field),
``/api/stream`` (Server-Sent Events: each described pair as it comes, from a bounded drop-oldest queue),
``/api/topics``, ``/api/topics/{name}``, ``/api/records``, ``/api/produce``, ``/api/groups`` (the
cluster view, :mod:`.cluster`).

Fails closed: a bind address that is not loopback needs a token (``--ui-token`` or
``KAFKAWIRE_UI_TOKEN``); with a token every request must carry it (``Authorization: Bearer``, or the
cookie that ``/?token=...`` sets).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
from importlib import resources
from typing import Any

from aiohttp import web

from kafkawire.protocol import KafkaError
from kafkawire.protocol.annotate import AnnotationError, annotate_request, annotate_response
from kafkawire.protocol.primitives import ProtocolError

from .cluster import ClusterView
from .tap import Tap

log = logging.getLogger("kafkawire.ui")
COOKIE = "kafkawire_console"
HEARTBEAT = 15.0  # seconds between SSE comments, so proxies and browsers keep the stream open


class ConsoleRefused(ValueError):
    """The console would be reachable beyond this machine without a token."""


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, option: str = "--ui-token") -> None:
    if not is_loopback(host) and not token:
        raise ConsoleRefused(
            f"the console would listen on {host}, beyond this machine, without authentication: set {option} "
            "(or KAFKAWIRE_UI_TOKEN), or bind it to 127.0.0.1"
        )


def _annotated(frame: bytes, request: bool, api_key, api_version) -> dict:
    error = None
    try:
        events = (
            annotate_request(frame, strict=False)
            if request
            else annotate_response(frame, api_key, api_version, strict=False)
        ).events
    except AnnotationError as exc:
        events, error = exc.events, str(exc)
    except (ProtocolError, KeyError, TypeError) as exc:
        events, error = [], str(exc)
    return {"hex": frame.hex(), "annotations": [e.to_dict() for e in events], "error": error}


class Console:
    def __init__(
        self, tap: Tap, bootstrap: str | None, *, token: str | None = None, kind: str = "broker", security=None
    ):
        """``security``: the cluster view's TLS and SASL (a ``ClientSecurity``; None: plaintext)."""
        self.tap = tap
        self.token = token
        self.kind = kind
        self.cluster = ClusterView(bootstrap, security) if bootstrap else None
        self._runner: web.AppRunner | None = None
        self._worker: asyncio.Task | None = None
        self.port: int | None = None
        self.host: str | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth])
        static = resources.files("kafkawire.ui") / "static"
        self._static = static
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._file)
        app.router.add_get("/api/info", self._info)
        app.router.add_get("/api/exchanges", self._exchanges)
        app.router.add_get("/api/exchanges/{id}", self._exchange)
        app.router.add_get("/api/stream", self._stream)
        app.router.add_get("/api/topics", self._topics)
        app.router.add_get("/api/topics/{name}", self._topic)
        app.router.add_get("/api/records", self._records)
        app.router.add_post("/api/produce", self._produce)
        app.router.add_get("/api/groups", self._groups)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> Console:
        check_bind(host, self.token)
        self._worker = asyncio.ensure_future(self.tap.run())
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.host, self.port = host, sockets[0].getsockname()[1] if sockets else port
        return self

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        if self._runner is not None:
            await self._runner.cleanup()
        if self.cluster is not None:
            await self.cluster.close()

    # -- authentication
    @web.middleware
    async def _auth(self, request: web.Request, handler):
        if not self.token:
            return await handler(request)
        given = request.query.get("token") or request.cookies.get(COOKIE) or ""
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            given = header[7:]
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return web.Response(status=401, text="kafkawire console: a token is needed (?token=... or Bearer)\n")
        response = await handler(request)
        if "token" in request.query:
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict")
        return response

    # -- the front end
    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(text=(self._static / "index.html").read_text(), content_type="text/html")

    async def _file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        kinds = {".js": "text/javascript", ".css": "text/css"}
        suffix = name[name.rfind(".") :] if "." in name else ""
        if suffix not in kinds or "/" in name or name.startswith("."):
            raise web.HTTPNotFound()
        path = self._static / name
        if not path.is_file():
            raise web.HTTPNotFound()
        return web.Response(text=path.read_text(), content_type=kinds[suffix])

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "kind": self.kind,
                "bootstrap": self.cluster.bootstrap if self.cluster else None,
                "security": self.cluster.security.protocol if self.cluster and self.cluster.security else "PLAINTEXT",
                "published": self.tap.published,
                "dropped": self.tap.dropped,
            }
        )

    # -- the live view
    async def _exchanges(self, request: web.Request) -> web.Response:
        return web.json_response(self.tap.recent())

    async def _exchange(self, request: web.Request) -> web.Response:
        try:
            entry = self.tap.entries[int(request.match_info["id"])]
        except (KeyError, ValueError):
            raise web.HTTPNotFound(text="no such exchange (the console keeps the last ones only)") from None
        ex = entry.exchange
        out: dict[str, Any] = {"summary": entry.summary}
        # annotating a frame is a walk over every field: in a thread, so a large frame never holds the loop
        if ex.request_payload:
            out["request"] = await asyncio.to_thread(_annotated, ex.request, True, ex.api_key, ex.api_version)
            out["request"]["truncated"] = entry.request_truncated
        if ex.response_payload:
            out["response"] = await asyncio.to_thread(_annotated, ex.response, False, ex.api_key, ex.api_version)
            out["response"]["truncated"] = entry.response_truncated
        elif ex.skim is not None:  # streamed while no browser watched: its error codes were read, no bytes kept
            out["response"] = {
                "hex": "",
                "annotations": [],
                "error": f"skimmed: {ex.skim.size + 4} bytes forwarded, error codes read, frame not kept",
                "truncated": False,
            }
        return web.json_response(out)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        sub = self.tap.subscribe()
        try:
            await response.write(b": kafkawire console\n\n")
            while True:
                items = await sub.get_all(HEARTBEAT)
                if not items:
                    await response.write(b": still here\n\n")
                    continue
                data = json.dumps({"exchanges": items, "dropped": sub.dropped}, separators=(",", ":"))
                await response.write(f"data: {data}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.tap.unsubscribe(sub)
        return response

    # -- the cluster view
    def _view(self) -> ClusterView:
        if self.cluster is None:
            raise web.HTTPServiceUnavailable(text="no cluster to show")
        return self.cluster

    async def _call(self, coro) -> web.Response:
        try:
            return web.json_response(await coro)
        except KafkaError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except (OSError, ConnectionError, TimeoutError) as exc:
            return web.json_response({"error": f"cluster unreachable: {exc}"}, status=502)

    async def _topics(self, request: web.Request) -> web.Response:
        return await self._call(self._view().topics())

    async def _topic(self, request: web.Request) -> web.Response:
        return await self._call(self._view().topic(request.match_info["name"]))

    async def _records(self, request: web.Request) -> web.Response:
        q = request.query
        try:
            topic, partition = q["topic"], int(q.get("partition", "0"))
            offset = int(q["offset"]) if q.get("offset") else None
            timestamp = int(q["timestamp"]) if q.get("timestamp") else None
            limit = int(q.get("limit", "50"))
        except (KeyError, ValueError) as exc:
            return web.json_response({"error": f"bad query: {exc}"}, status=400)
        fmt = q.get("format", "text")
        return await self._call(
            self._view().records(topic, partition, offset=offset, timestamp_ms=timestamp, limit=limit, fmt=fmt)
        )

    async def _produce(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            topic, value = str(body["topic"]), str(body.get("value", ""))
            key = body.get("key") or None
            headers = {str(k): str(v) for k, v in (body.get("headers") or {}).items()}
            partition = int(body["partition"]) if body.get("partition") not in (None, "") else None
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            return web.json_response({"error": f"bad request: {exc}"}, status=400)
        return await self._call(self._view().produce(topic, value, key, headers, partition))

    async def _groups(self, request: web.Request) -> web.Response:
        return await self._call(self._view().groups())


__all__ = ["Console", "ConsoleRefused", "check_bind", "is_loopback"]
