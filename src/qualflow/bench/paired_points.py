"""`qualflow bench engine --paired-rounds N`: each A/B pair of the plan measured again with both
variants loaded at once, their points alternated: per round one repeat of each side (the order
swapped every round), and the figure is the median of the rounds' throughput ratios (paired.py).
Measured one variant after the other, a host-bound point drifts with the machine by more than a
2 % question can bear (the prefix plan's c64 ISL 128 pair read 1.01, 1.08 and 0.92 in three calls);
a drift slows both sides of a round alike, so the ratio holds."""

from __future__ import annotations

from .paired import paired
from .points import POINTS, scaled, steady_point
from .variant_load import variant_overrides
from .variants import plan


def _points(cfg, a, b) -> list[tuple[str, int, int, int]]:
    """(name, concurrency, ISL, OSL) of the points both variants run (--points where given)."""
    names = cfg.points.split(",") if cfg.points else [p[0] for p in POINTS]
    both = [n for n in names if (not a.points or n in a.points) and (not b.points or n in b.points)]
    return [
        (name, *scaled(c, isl, osl, cfg.tiny)) for name, c, isl, osl, _ in POINTS if name in both
    ]


def _rounds(tasks: dict, order: tuple, point: tuple, cfg) -> dict[str, list[float]]:
    """Each side's output tok/s per round: one repeat of at least --min-seconds each."""
    _, c, isl, osl = point
    runs: dict[str, list[float]] = {tag: [] for tag in order}
    for r in range(cfg.paired_rounds):
        for tag in order if r % 2 == 0 else order[::-1]:
            got = steady_point(tasks[tag], c, isl, osl, cfg.min_seconds, 1)
            runs[tag].append(got["output_tok_per_s"])
    return runs


def measure_paired_points(run) -> None:
    """Every pair of the plan: both variants loaded, their shared points alternated; into
    run.result["paired"] under "<point><test tag>_vs<base tag>" (saved after each point)."""
    cfg = run.cfg
    variants, pairs = plan(cfg.plan, cfg.async_scheduling)
    by_tag = {v.tag: v for v in variants}
    out = run.result.setdefault("paired", {})
    for base, test, label in pairs:
        tasks = {}
        try:
            for tag in (base, test):
                tasks[tag] = run.load(**variant_overrides(by_tag[tag], cfg.tiny))
            for point in _points(cfg, by_tag[base], by_tag[test]):
                runs = _rounds(tasks, (base, test), point, cfg)
                rec = {"label": label, **paired(runs[base], runs[test]), "runs": runs}
                out[f"{point[0]}{test}_vs{base}"] = rec
                lo, hi = rec["ratio_min"], rec["ratio_max"]
                print(
                    f"paired {point[0]}: {test} / {base} {rec['ratio']:.3f} [{lo:.3f}, {hi:.3f}]"
                    f" over {rec['rounds']} alternated rounds ({label})",
                    flush=True,
                )
                run.save()
        except Exception as e:  # noqa: BLE001 - record, go on with the next pair
            out[f"{test}_vs{base}"] = {"error": repr(e)}
            print(f"paired {test} vs {base} failed: {e!r}", flush=True)
        finally:
            for task in tasks.values():
                run.release(task)
