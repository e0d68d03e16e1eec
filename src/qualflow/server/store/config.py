"""StoreConfig: where the response store lives and how long it keeps what it stores."""

from __future__ import annotations

from dataclasses import dataclass

from qualflow.configs import setting


@dataclass(frozen=True)
class StoreConfig:
    url: str | None = setting(
        None,
        flag="--store",
        help="response store: a SQLite file (path or sqlite:///PATH) or postgresql://USER@HOST/DB; "
        "none: responses are not stored (store:true and previous_response_id are rejected)",
    )
    max_age_s: float | None = setting(
        30 * 24 * 3600.0,
        flag="--store-max-age-s",
        help="stored responses older than this are deleted (none: kept however old)",
    )
    max_responses: int | None = setting(
        100_000,
        flag="--store-max-responses",
        help="beyond this many stored responses the oldest are deleted (none: no bound)",
    )
    prune_interval_s: float = setting(
        60.0, flag="--store-prune-interval-s", help="seconds between two retention passes"
    )
    prune_batch: int = setting(
        1000,
        flag="--store-prune-batch",
        help="at most this many responses deleted per retention transaction",
    )

    def __post_init__(self):
        if self.max_age_s is not None and self.max_age_s <= 0:
            raise ValueError(
                f"max_age_s (--store-max-age-s) must be positive, not {self.max_age_s}"
            )
        if self.max_responses is not None and self.max_responses < 1:
            raise ValueError(
                f"max_responses (--store-max-responses) must be at least 1, "
                f"not {self.max_responses}"
            )
        if self.prune_interval_s <= 0:
            raise ValueError(
                f"prune_interval_s (--store-prune-interval-s) must be positive, "
                f"not {self.prune_interval_s}"
            )
        if self.prune_batch < 1:
            raise ValueError(
                f"prune_batch (--store-prune-batch) must be at least 1, not {self.prune_batch}"
            )
