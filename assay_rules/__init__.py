"""The rules the service and the trainer must agree on, defined once.

Plain data in, plain data out, standard library only: `service` and `trainer_client`
both import this package, and it imports neither (nor anything outside the standard
library), so a trainer installs it without FastAPI and the service without torch.

- `grouping`: a trainer's flat batch -> GRPO groups (consecutive runs of one task).
- `variance`: the one definition of a zero-variance group.
- `advantages`: group-relative advantages (`group_advantages`, `GroupStats`).
- `rewards`: reward rounding (`REWARD_DECIMALS`, `round_reward`).
- `canonical`: the canonical JSON that receipts sign and audit chains hash.
"""

from assay_rules.advantages import GroupStats, group_advantages
from assay_rules.canonical import canonical_json, key_id_of, response_hash
from assay_rules.grouping import consecutive_runs
from assay_rules.rewards import REWARD_DECIMALS, round_reward
from assay_rules.variance import ZERO_VARIANCE_SPAN, is_zero_variance

__all__ = [
    "REWARD_DECIMALS",
    "ZERO_VARIANCE_SPAN",
    "GroupStats",
    "canonical_json",
    "consecutive_runs",
    "group_advantages",
    "is_zero_variance",
    "key_id_of",
    "response_hash",
    "round_reward",
]
