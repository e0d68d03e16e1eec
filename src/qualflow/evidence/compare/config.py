"""The settings of one comparison: `qualflow compare`'s flags are generated from these fields."""

from __future__ import annotations

from dataclasses import dataclass

from qualflow.configs import setting


@dataclass(frozen=True)
class CompareOptions:
    force: bool = setting(False, help="compare even if dataset, workload or server settings differ")
    confidence: float = setting(0.95, help="1 - false discovery rate over all tests")
    resamples: int = setting(2000, help="minimum bootstrap resamples (scaled to the level)")
    noise_rel: float | None = setting(
        None,
        help="configured noise floor, fraction of the base value (default: none; "
        "run-to-run noise must then be measured from comparable runs on "
        "both sides)",
    )
    noise_abs_ms: float | None = setting(None, help="configured noise floor for ms metrics")
    default_floor_rel: float = setting(
        0.5,
        help="where run-to-run noise is neither measured nor configured: a "
        "delta whose whole CI lies beyond this fraction of the base value (an aggregate: its "
        "delta) is judged (0.5: 'regression beyond a default floor of 50 percent'); smaller ones "
        "stay inconclusive. Far above the spread of identical runs on a loaded host (up to ~18 "
        "percent in ITL p50). 0: off",
    )
    seed: int = setting(0, help="the bootstrap's seed")

    @property
    def floor_configured(self) -> bool:
        return self.noise_rel is not None or self.noise_abs_ms is not None

    @property
    def default_floor_pct(self) -> str:
        """The default floor as the page states it ("50 %")."""
        return f"{self.default_floor_rel * 100:g} %"


# fields with no `qualflow compare` flag (they keep their default there)
NOT_ON_CLI = ("seed",)
