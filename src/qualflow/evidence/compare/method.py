"""The method of a comparison, as the page states it."""

from __future__ import annotations

from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.stats import INCONCLUSIVE, TAIL_RESAMPLES, VERSION_WORDS

METHOD_TEXT = (
    "Deltas are head - base. Each test (point, metric, percentile;"
    " a percentile only when each side has >= 8 "
    "requests beyond it: p50 >= 16, p90 >= 80, p99 >"
    "= 800 requests) is a BCa bootstrap (scipy.stats.bootstrap) "
    "of the difference of the statistic, resampling each run's per-request rows (a point's "
    "samples: matched "
    "profiling requests, an endpoint's error-free client-only ones;"
    " warm-up excluded) independently, seed {seed}, "
    "with its p-value from inverting the BCa interval. The "
    "family is every test of this comparison, across points and within each: Benjamini-Hochberg at "
    "a false "
    "discovery rate of {fdr:.0%}"
    " selects the tests, and every CI is shown at the matching FCR-adjusted level "
    "(the Bonferroni level when nothing is selected); the resample count is scaled to that level "
    "(>= {tail}"
    " resamples beyond each end). Within-run resampling cannot see run-to-run noise, so a delta "
    "is significant only if its CI excludes 0 AND |delta| exceeds the noise floor AND that floor "
    "means "
    "something: run-to-run noise measured on both sides (>"
    "= 2 comparable runs each: same version, dataset, "
    "workload, server settings and status; repeats or history), its floor being the largest spread "
    "(max - min) of the statistic across either side's comparable runs, or a floor configured "
    "({floor}). "
    "Otherwise a CI that excludes 0 reads '"
    + INCONCLUSIVE
    + "', unless its whole CI lies beyond the default "
    "floor of {default_floor}"
    " of the base value (far beyond the spread of identical runs on a loaded host, "
    "--default-floor-rel): it then reads '{worse} beyond a default floor of {default_floor}' (or "
    "'{better} ...'), as does an aggregate throughput delta (one value a side) beyond it. The "
    "Mann-Whitney U p-value (two-sided, "
    "whole distributions) is a second opinion only. Per-request output tokens/s is the server's "
    "output "
    "token count over the client request latency. Aggregate AIPerf output tokens/s is one number "
    "per run, "
    "shown without a test."
)


def method_text(o: CompareOptions, words: tuple[str, str] = VERSION_WORDS) -> str:
    """The method in the comparison's words (stats.words_for: a difference between stacks)."""
    floor = (
        "configured: "
        + ", ".join(
            x
            for x in (
                f"{o.noise_rel:.0%} of base" if o.noise_rel is not None else "",
                f"{o.noise_abs_ms:g} ms for ms metrics" if o.noise_abs_ms is not None else "",
            )
            if x
        )
        if o.floor_configured
        else "none configured"
    )
    return METHOD_TEXT.format(
        seed=o.seed,
        fdr=1 - o.confidence,
        tail=TAIL_RESAMPLES,
        floor=floor,
        default_floor=o.default_floor_pct,
        worse=words[0],
        better=words[1],
    )
