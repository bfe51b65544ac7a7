"""Requests and responses on the wire: header + body, with the header version derived.

The header version is never sent: it follows from (API key, API version), so
decoding a request reads the fixed prefix (key, version, correlation id)
first, then decodes the rest of the header and the body at the right versions.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, NamedTuple

from . import apis
from .api_keys import ApiKey
from .framing import frame_size_prefix
from .messages import Message, _as_view, message_class  # type: ignore[attr-defined]  # _as_view: not in the stub
from .primitives import DecodeError, UnsupportedVersionError

if TYPE_CHECKING:  # the classes exist at run time only once message_class() builds them
    from .messages import RequestHeader, ResponseHeader

_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_V0_CLIENT_ID = message_class("RequestHeader")().client_id


class Request(NamedTuple):
    header: RequestHeader
    body: Message
    header_version: int

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version


class Response(NamedTuple):
    header: ResponseHeader
    body: Message
    header_version: int


def request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None = "kafkawire"
) -> RequestHeader:
    return message_class("RequestHeader")(
        request_api_key=api_key, request_api_version=api_version, correlation_id=correlation_id, client_id=client_id
    )


def encode_request_parts(header: RequestHeader, body: Message) -> list:
    """Size prefix, header and body as a list of buffers (records pass through uncopied)."""
    key, version = header.request_api_key, header.request_api_version
    if body.spec.api_key != key:
        raise ValueError(f"header says API key {key} but the body is {body.spec.name}")
    header_version = apis.request_header_version(key, version)
    if header_version == 0 and header.client_id != _V0_CLIENT_ID:
        header = header.replace(client_id=_V0_CLIENT_ID)  # header v0 has no client id to carry
    parts: list = [b""]
    header.encode_into(parts.append, header_version)
    body.encode_into(parts.append, version)
    parts[0] = frame_size_prefix(sum(map(len, parts)))
    return parts


def encode_request(header: RequestHeader, body: Message) -> bytes:
    """The whole frame: size, header, body."""
    return b"".join(encode_request_parts(header, body))


def peek_request_prefix(payload) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of an unframed request, without decoding more."""
    if len(payload) < 8:
        raise DecodeError(
            f"request of {len(payload)} bytes is shorter than the 8-byte header prefix",
            offset=0,
            message="RequestHeader",
        )
    return _PREFIX.unpack_from(payload, 0)


def decode_request(data, *, framed: bool = True, strict: bool = True) -> Request:
    """Decode a request. ``framed``: ``data`` starts with the 4-byte size."""
    view = _as_view(data)
    if framed:
        view = _unframe(view)
    key, version, _ = peek_request_prefix(view)
    try:
        info = apis.api(key)
    except KeyError:
        raise DecodeError(f"unknown API key {key}", offset=0, message="RequestHeader") from None
    if not info.supports(version):
        raise UnsupportedVersionError(f"{info.name} v{version} is outside {info.min_version}-{info.max_version}")
    header_cls = message_class("RequestHeader")
    header_version = apis.request_header_version(key, version)
    header, pos = header_cls.decode_from(view, 0, header_version)
    if header.client_id is None:
        header.client_id = ""  # a null client id reads as empty, as Kafka does
    body_cls = message_class(info.request)
    body, end = body_cls.decode_from(view, pos, version)
    if strict and end != len(view):
        raise DecodeError(
            f"{len(view) - end} trailing bytes after the request body", offset=end, message=f"{info.request} v{version}"
        )
    return Request(header, body, header_version)


def encode_response_parts(correlation_id: int, body: Message, api_version: int) -> list:
    api_key = body.spec.api_key
    assert api_key is not None, f"{body.spec.name} is not a response"  # only headers and data have no API key
    header_version = apis.response_header_version(api_key, api_version)
    header = message_class("ResponseHeader")(correlation_id=correlation_id)
    parts: list = [b""]
    header.encode_into(parts.append, header_version)
    body.encode_into(parts.append, api_version)
    parts[0] = frame_size_prefix(sum(map(len, parts)))
    return parts


def encode_response(correlation_id: int, body: Message, api_version: int) -> bytes:
    return b"".join(encode_response_parts(correlation_id, body, api_version))


def decode_response(data, api_key: int, api_version: int, *, framed: bool = True, strict: bool = True) -> Response:
    view = _as_view(data)
    if framed:
        view = _unframe(view)
    info = apis.api(api_key)
    header_version = apis.response_header_version(api_key, api_version)
    header, pos = message_class("ResponseHeader").decode_from(view, 0, header_version)
    body_cls = message_class(info.response)
    try:
        body, end = body_cls.decode_from(view, pos, api_version)
        if strict and end != len(view) and api_key == ApiKey.API_VERSIONS and api_version:
            raise DecodeError("trailing bytes", offset=end)
    except DecodeError:
        if api_key != ApiKey.API_VERSIONS or api_version == 0:
            raise
        # A broker that does not support the requested ApiVersions version answers with a
        # v0 body (UNSUPPORTED_VERSION and its own ranges); read it the way Kafka's client does.
        body, end = body_cls.decode_from(view, pos, 0)
    if strict and end != len(view):
        raise DecodeError(
            f"{len(view) - end} trailing bytes after the response body",
            offset=end,
            message=f"{info.response} v{api_version}",
        )
    return Response(header, body, header_version)


def _unframe(view) -> memoryview:
    if len(view) < 4:
        raise DecodeError("frame shorter than its 4-byte size", offset=0, message="frame")
    (size,) = _SIZE.unpack_from(view, 0)
    if size < 0 or size != len(view) - 4:
        raise DecodeError(
            f"frame size {size} does not match the {len(view) - 4} bytes that follow it", offset=0, message="frame"
        )
    return memoryview(view)[4:]  # the payload without copying it
