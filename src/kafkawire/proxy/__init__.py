"""``kafkawire proxy``: a transparent Kafka-protocol proxy that shows what passes.

* :mod:`.addresses` -- which local port stands for which upstream broker, and the rewriting of the
  responses that carry broker addresses (the only frames the proxy re-encodes);
* :mod:`.relay` -- the asyncio listeners and the two byte pumps of each connection, around the observer
  side of :class:`kafkawire.protocol.connection.ProtocolConnection`;
* :mod:`.pipe` -- one socket as an asyncio protocol that is its own reader and writer, without the
  copies of asyncio's streams;
* :mod:`.report` -- one line (or JSON object, or annotated tree) per request/response pair, the filters
  and the summary printed on exit;
* :mod:`.pcapng` -- a pcapng file of the client-side conversations.
"""

from __future__ import annotations

from .addresses import AddressMap, rewrite_response, rewrites
from .pcapng import PcapngWriter
from .relay import Proxy, ProxyConfig, parse_address
from .report import Exchange, Filters, Reporter

__all__ = [
    "AddressMap",
    "Exchange",
    "Filters",
    "PcapngWriter",
    "Proxy",
    "ProxyConfig",
    "Reporter",
    "parse_address",
    "rewrite_response",
    "rewrites",
]
