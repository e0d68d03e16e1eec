"""The settings of one comparison: `qualflow compare`'s flags are generated from these fields."""
from __future__ import annotations

from dataclasses import dataclass

from qualflow.configs import setting


@dataclass(frozen=True)
class CompareOptions:
    force: bool = setting(False, help="compare even if dataset, workload or server settings differ")
    confidence: float = setting(0.95, help="1 - false discovery rate over all tests")
    resamples: int = setting(2000, help="minimum bootstrap resamples (scaled to the level)")
    noise_rel: float | None = setting(None, help="configured noise floor, fraction of the base value (default: none; "
                                                 "run-to-run noise must then be measured from comparable runs on "
                                                 "both sides)")
    noise_abs_ms: float | None = setting(None, help="configured noise floor for ms metrics")
    seed: int = setting(0, help="the bootstrap's seed")

    @property
    def floor_configured(self) -> bool:
        return self.noise_rel is not None or self.noise_abs_ms is not None


# fields with no `qualflow compare` flag (they keep their default there)
NOT_ON_CLI = ("seed",)
