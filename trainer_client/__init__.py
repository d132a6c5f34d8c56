"""Assay trainer client: speaks HTTP/JSON to the reward service and imports none of it.

The client and adapters need only httpx, pydantic and cryptography (receipts); `grpo`, `loop`, `tiny` and `demo`
need torch and transformers (the `trainer` extra).
"""

from trainer_client.client import AsyncRewardClient, ClientStats, RetryPolicy, RewardClient
from trainer_client.receipts import ReceiptError, ReceiptKey
from trainer_client.results import ErrorPolicy, Group, GroupResult, ResponseResult, RewardError, RewardRequestError

__all__ = [
    "AsyncRewardClient",
    "ClientStats",
    "ErrorPolicy",
    "Group",
    "GroupResult",
    "ReceiptError",
    "ReceiptKey",
    "ResponseResult",
    "RetryPolicy",
    "RewardClient",
    "RewardError",
    "RewardRequestError",
]
