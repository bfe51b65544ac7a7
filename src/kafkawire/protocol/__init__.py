"""kafkawire.protocol: Kafka's wire protocol, sans I/O.

Bytes and messages only; nothing here opens a socket. Message classes are
generated from the spec (``spec/messages.json``, derived from Apache Kafka's
schemas by ``tools/gen_spec.py``) and compiled per version on first use.
"""

from __future__ import annotations

from .api_keys import ApiKey
from .apis import ApiInfo, all_apis, api, api_by_name, request_header_version, response_header_version
from .connection import (
    NeedData,
    ProtocolConnection,
    ProtocolViolation,
    RequestReceived,
    ResponseReceived,
    Role,
    SaslTokenReceived,
    StreamEnded,
)
from .errors import ErrorCode, KafkaError, error_for
from .framing import frame
from .messages import Message, Struct, message_class
from .negotiation import negotiate, pick_version, supported_ranges
from .primitives import DecodeError, EncodeError, FrameError, ProtocolError, UnsupportedVersionError
from .rpc import (
    Request,
    Response,
    decode_request,
    decode_response,
    encode_request,
    encode_request_parts,
    encode_response,
    encode_response_parts,
    peek_request_prefix,
    request_header,
)

__all__ = [
    "ApiKey",
    "ApiInfo",
    "all_apis",
    "api",
    "api_by_name",
    "request_header_version",
    "response_header_version",
    "ErrorCode",
    "KafkaError",
    "error_for",
    "frame",
    "Message",
    "Struct",
    "message_class",
    "negotiate",
    "pick_version",
    "supported_ranges",
    "DecodeError",
    "EncodeError",
    "FrameError",
    "ProtocolError",
    "UnsupportedVersionError",
    "Request",
    "Response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_request_parts",
    "encode_response",
    "encode_response_parts",
    "peek_request_prefix",
    "request_header",
    "ProtocolConnection",
    "Role",
    "NeedData",
    "RequestReceived",
    "ResponseReceived",
    "SaslTokenReceived",
    "ProtocolViolation",
    "StreamEnded",
]


def __getattr__(name: str):
    # from kafkawire.protocol import FetchRequest
    from . import messages

    return getattr(messages, name)
