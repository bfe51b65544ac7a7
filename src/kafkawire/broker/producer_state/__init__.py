"""Broker-wide state of idempotent producers (one ``ProducerStateManager`` per broker, ``broker.producers``)."""

from .state import WINDOW, BatchMeta, ProducerEntry, ProducerStateManager

__all__ = ["WINDOW", "BatchMeta", "ProducerEntry", "ProducerStateManager"]
