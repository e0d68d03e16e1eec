"""An engine variant of a `qualflow bench engine` plan (variants.py, variants_wave4.py):
EngineConfig overrides, the key suffix of its points and the points it measures; and the point
sets the plans share."""

from __future__ import annotations

from dataclasses import dataclass, field

C1 = ("c1_isl128_osl256", "c1_isl1024_ttft")
C64 = (
    "c64_isl1024_osl256",
    "c64_isl128_osl128",
    "c256_isl128_osl128",
)  # past --deadline-s: the first
ASYNC_POINTS = ("c1_isl128_osl256", "c64_isl128_osl128", "c256_isl128_osl128", "c64_isl1024_osl256")


@dataclass(frozen=True)
class Variant:
    tag: str
    engine: dict = field(default_factory=dict)
    points: tuple[str, ...] = ()  # empty: every point of the run
    main: bool = (
        False  # the variant of record: family correctness and the offline workload run on it
    )
    offline: bool = False  # the offline workload runs on this variant too
    constrained: bool = False  # the constrained-decoding figures run on this variant (--plan tools)
    label: str = ""
