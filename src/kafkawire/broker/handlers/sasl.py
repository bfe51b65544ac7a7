"""SaslHandshake, SaslAuthenticate on a PLAINTEXT listener: what Kafka's request handler answers there
(ILLEGAL_SASL_STATE), so a client configured for SASL gets a clear error instead of a dropped connection.
kafkawire has no SASL listener."""
from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse

from ..dispatch import handles


@handles("SaslHandshake", 0, 1)
def sasl_handshake(broker, ctx, body):
    return SaslHandshakeResponse(error_code=errors.ILLEGAL_SASL_STATE, mechanisms=[])


@handles("SaslAuthenticate", 0, 2)
def sasl_authenticate(broker, ctx, body):
    return SaslAuthenticateResponse(error_code=errors.ILLEGAL_SASL_STATE,
                                    error_message="SaslAuthenticate request received after successful "
                                                  "authentication", auth_bytes=b"")
