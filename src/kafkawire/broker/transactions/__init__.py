"""Transactions: the transaction coordinator, its states and its durable log ``__transaction_state``."""

from .config import TxnConfig
from .coordinator import EndResult, InitResult, MarkerWriter, TransactionCoordinator
from .metadata import TxnMetadata
from .states import TxnEvent, TxnState

__all__ = [
    "TxnConfig",
    "TransactionCoordinator",
    "MarkerWriter",
    "InitResult",
    "EndResult",
    "TxnMetadata",
    "TxnState",
    "TxnEvent",
]
