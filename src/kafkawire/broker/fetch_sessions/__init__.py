"""Broker-wide fetch sessions of KIP-227 (one ``FetchSessionCache`` per broker, ``broker.fetch_sessions``)."""

from .cache import CachedPartition, FetchContext, FetchSession, FetchSessionCache

__all__ = ["CachedPartition", "FetchContext", "FetchSession", "FetchSessionCache"]
