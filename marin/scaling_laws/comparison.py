"""Compute multipliers between labels (datasets, mixtures): how much more compute one needs.

    from marin.scaling_laws.comparison import compare_labels
    rows = compare_labels({"plays": plays_runs, "docs": docs_runs}, baseline="plays",
                          targets=[1e19, 1e20], bootstrap=1000)
    rows[0].multiplier            # C_docs(L) / C_plays(L) at L = plays' optimal loss at 1e19
    rows[0].interval              # joint bootstrap interval (95%)
    rows[0].excludes_one          # the labels differ at that level

Each label's loss law is its Approach 2 law ``L_opt(C) = k * C^a``: per budget a parabola
of loss in ln tokens (``fit_budget``'s Huber loss), its minimum, and a line through the
minima in log-log space (``fit_power_law(..., "loss")``). ``C_X(L)`` inverts label X's
law, and ``m = C_label(L) / C_baseline(L)`` at ``L = L_opt,baseline(target)``, so
``C_baseline(L)`` is the target itself. A multiplier of 2 says the label needs twice the
baseline's compute to reach the loss the baseline reaches at the target.

When a label's Approach 2 law cannot be fitted (fewer than 2 budgets with a parabola, or a
law whose loss does not fall with compute), both labels of that comparison use Approach 3
instead, the compute-optimal curve of ``L(N, D) = E + A/N^alpha + B/D^beta``, which is
``E + G * C^-gamma`` with ``gamma = alpha beta / (alpha + e beta)`` (e: the FLOPs-per-token
exponent); ``reason`` says why. One comparison never mixes the two kinds of law.

Design notes:

- The bootstrap is joint: in resample r every label's runs are drawn again with
  replacement within each of its budgets, both labels' laws are refitted, and m is
  recomputed, the target loss included (the baseline's refitted law at the target). Each
  label has its own random stream, seeded by ``seed`` and the label's name, so adding a
  label changes no other label's resamples. The interval is the percentile interval of the
  resamples; resamples in which a parabola has no minimum (fewer than 3 distinct sizes
  drawn, or opening downward) or a law does not fall with compute are left out and counted
  (``resamples`` says how many remain).
- Vectorised: all resamples of one budget are fitted at once (``fit_parabolas``: closed-form
  weighted least squares per row, reweighted for the Huber loss), and the log-log lines of
  all resamples in one array expression; no optimiser runs per resample. 10 labels x 100
  runs x 1,000 resamples take well under a second (``bench/bench_study_fit.py``).
- Approach 3's resamples are ``fit_parametric_loss``'s own bootstrap (runs drawn from all
  budgets together), paired by index across the two labels.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from marin.scaling_laws.isoflop_analysis import (
    MIN_POINTS_PER_BUDGET,
    clean_records,
    fit_parabolas,
    group_by_budget,
    parabola_minimum,
)
from marin.scaling_laws.values import MIN_RUNS_PARAMETRIC, RunRow

__all__ = ["ComputeMultiplier", "LossLaw", "compare_labels", "loss_law"]



@dataclass(frozen=True)
class ComputeMultiplier:
    """How many times the baseline's compute ``label`` needs to reach ``loss``."""

    FORMAT: ClassVar[int] = 1

    baseline: str
    label: str
    target_budget: float  # the tier the comparison is made at
    loss: float  # the baseline's predicted optimal loss at that tier
    multiplier: float  # C_label(loss) / C_baseline(loss); inf: the label never reaches it
    interval: tuple[float, float]  # joint bootstrap at `level`; NaN without resamples
    excludes_one: bool
    source: str  # "approach2" or "approach3" (fallback)
    level: float = 0.95
    resamples: int = 0  # bootstrap resamples the interval rests on
    reason: str = ""  # why Approach 3 was used; empty for Approach 2

    def to_json(self) -> dict[str, Any]:
        return {"format_version": self.FORMAT, "baseline": self.baseline, "label": self.label,
                "target_budget": self.target_budget, "loss": _out(self.loss),
                "multiplier": _out(self.multiplier),
                "interval": [_out(v) for v in self.interval],
                "excludes_one": self.excludes_one, "source": self.source,
                "level": self.level, "resamples": self.resamples, "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ComputeMultiplier:
        version = data.get("format_version")
        if version != cls.FORMAT:
            raise ValueError(f"compute multiplier: format_version {version!r} is not "
                             f"{cls.FORMAT}; rewrite it with this version of marin")
        missing = sorted(set(_FIELDS) - set(data))
        if missing:
            raise ValueError(f"compute multiplier: missing field(s) {', '.join(missing)}; "
                             "the file was not written by ComputeMultiplier.to_json")
        low, high = data["interval"]
        return cls(baseline=data["baseline"], label=data["label"],
                   target_budget=float(data["target_budget"]), loss=float(data["loss"]),
                   multiplier=float(data["multiplier"]), interval=(float(low), float(high)),
                   excludes_one=bool(data["excludes_one"]), source=data["source"],
                   level=float(data["level"]), resamples=int(data["resamples"]),
                   reason=data["reason"])


_FIELDS = ("baseline", "label", "target_budget", "loss", "multiplier", "interval",
           "excludes_one", "source", "level", "resamples", "reason")


def _out(value: float) -> float | str:
    """JSON has no NaN or infinity: those are written as the strings "nan", "inf", "-inf"."""
    return value if math.isfinite(value) else str(value)


@dataclass(frozen=True)
class LossLaw:
    """A compute-optimal loss law ``L(C) = E + exp(log_g) * C^-gamma``, one entry per fit:
    index 0 is the fit to all runs, the rest bootstrap resamples (NaN where one failed).
    Approach 2's ``k * C^a`` is E = 0, log_g = ln k, gamma = -a."""

    source: str  # "approach2" or "approach3"
    E: np.ndarray
    log_g: np.ndarray
    gamma: np.ndarray

    def loss(self, budget: float) -> np.ndarray:
        """The optimal loss at ``budget`` of every fit."""
        return self.E + np.exp(self.log_g - self.gamma * math.log(budget))

    def log_compute(self, loss: np.ndarray) -> np.ndarray:
        """ln C at which each fit reaches ``loss``: +inf at or below E (never reached),
        NaN where the law does not fall with compute."""
        with np.errstate(divide="ignore", invalid="ignore"):
            above = np.asarray(loss) - self.E
            out = (self.log_g - np.log(np.where(above > 0, above, 1.0))) / self.gamma
            out = np.where(above > 0, out, np.where(np.isnan(above), np.nan, np.inf))
            return np.where(self.gamma > 0, out, np.nan)


def loss_law(records: Sequence[RunRow], source: str = "approach2", bootstrap: int = 0,
             seed: int = 0) -> LossLaw:
    """One label's loss law and ``bootstrap`` resampled refits of it.

    Raises ``ValueError`` (saying why) when the runs cannot support the law."""
    _check_bootstrap(bootstrap)
    kept, _ = clean_records(records)
    if source == "approach2":
        return _approach2(kept, bootstrap, np.random.default_rng(seed))
    if source == "approach3":
        return _approach3(kept, bootstrap, seed)
    raise ValueError(f"source={source!r}: use 'approach2' or 'approach3'")


def _approach2(records: Sequence[RunRow], bootstrap: int,
               rng: np.random.Generator) -> LossLaw:
    budgets, minima, few, no_minimum = [], [], 0, 0
    for budget, runs in group_by_budget(records).items():
        if len(runs) < MIN_POINTS_PER_BUDGET:
            few += 1
            continue
        x = np.log([r.tokens for r in runs])
        y = np.array([r.loss for r in runs])
        point = parabola_minimum(fit_parabolas(x, y))[0]
        if not np.isfinite(point):
            no_minimum += 1
            continue
        weights = rng.multinomial(len(runs), np.full(len(runs), 1 / len(runs)),
                                  size=bootstrap)
        resampled = parabola_minimum(fit_parabolas(x, y, weights)) if bootstrap else []
        budgets.append(budget)
        minima.append(np.concatenate([[point], resampled]))
    if len(budgets) < 2:
        raise ValueError(
            f"{len(budgets)} budget(s) with a fitted parabola ({few} with fewer than "
            f"{MIN_POINTS_PER_BUDGET} runs, {no_minimum} whose loss has no minimum in ln "
            "tokens); the Approach 2 loss law needs 2")
    x = np.log(budgets) - np.mean(np.log(budgets))
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.log(np.array(minima).T)  # (1 + bootstrap, budgets)
    slope = (y - y.mean(axis=1, keepdims=True)) @ x / (x @ x)
    log_k = y.mean(axis=1) - slope * np.mean(np.log(budgets))
    if not slope[0] < 0:
        raise ValueError(f"the optimal loss does not fall with compute (exponent "
                         f"{slope[0]:.3g} over budgets {', '.join(f'{b:.3g}' for b in budgets)})")
    return LossLaw("approach2", np.zeros_like(slope), log_k, -slope)


def _approach3(records: Sequence[RunRow], bootstrap: int, seed: int) -> LossLaw:
    from threadpoolctl import threadpool_limits

    from marin.scaling_laws.parametric import fit_parametric_loss, optimal_allocation

    if len(records) < MIN_RUNS_PARAMETRIC:
        raise ValueError(f"{len(records)} usable run(s); L(N, D) needs at least "
                         f"{MIN_RUNS_PARAMETRIC}")
    # Batched L-BFGS makes many tiny BLAS calls: more threads only add wake-up time.
    with threadpool_limits(limits=1, user_api="blas"), np.errstate(all="ignore"):
        fit = fit_parametric_loss([r.params for r in records], [r.tokens for r in records],
                                  [r.loss for r in records], bootstrap=bootstrap, seed=seed,
                                  flops=[r.flops for r in records])
    rows = np.array([[fit.E, fit.A, fit.B, fit.alpha, fit.beta]])
    if bootstrap:
        rows = np.concatenate([rows, fit.samples()])
    e, a, b, alpha, beta = rows.T
    reference = float(np.exp(np.mean(np.log([r.flops for r in records]))))
    with np.errstate(all="ignore"):
        n, d = optimal_allocation(a, b, alpha, beta, reference, fit.flops_coefficient,
                                  fit.flops_exponent)
        gamma = alpha * beta / (alpha + fit.flops_exponent * beta)
        log_g = np.log(a / n**alpha + b / d**beta) + gamma * math.log(reference)
    return LossLaw("approach3", e, log_g, gamma)


def compare_labels(records: Mapping[str, Sequence[RunRow]], baseline: str,
                   targets: Sequence[float], bootstrap: int = 1000, seed: int = 0,
                   level: float = 0.95, approach: str = "approach2"
                   ) -> list[ComputeMultiplier]:
    """One ``ComputeMultiplier`` per other label and target, in the order given.

    ``approach="approach3"`` compares every label on Approach 3's curves, which have an
    irreducible loss E: Approach 2's pure power law has none, so on runs that approach E,
    extrapolating it far past the swept budgets pulls the multiplier towards 1."""
    _check(records, baseline, targets, level)
    _check_bootstrap(bootstrap)
    if approach not in ("approach2", "approach3"):
        raise ValueError(f"approach={approach!r}: use 'approach2' (Approach 3 as a fallback) "
                         "or 'approach3'")
    laws: dict[tuple[str, str], LossLaw] = {}
    errors: dict[tuple[str, str], str] = {}

    def law(label: str, source: str) -> LossLaw | None:
        key = (label, source)
        if key not in laws and key not in errors:
            try:
                laws[key] = loss_law(records[label], source, bootstrap,
                                     _label_seed(seed, label, source))
            except ValueError as e:
                errors[key] = str(e)
        return laws.get(key)

    out = []
    for label in records:
        if label == baseline:
            continue
        pair, reason = (law(baseline, approach), law(label, approach)), ""
        if approach == "approach2" and None in pair:
            failed = baseline if pair[0] is None else label
            reason = (f"Approach 2 failed for {failed!r}: {errors[(failed, 'approach2')]}")
            pair = (law(baseline, "approach3"), law(label, "approach3"))
        for name, fitted in zip((baseline, label), pair, strict=True):
            if fitted is None:
                why = f" and the comparison with {label!r} needs it ({reason})" if reason else ""
                raise ValueError(
                    f"records[{name!r}]: Approach 3 cannot be fitted "
                    f"({errors[(name, 'approach3')]}){why}; add runs for this label, 3 or more "
                    "at each of 2 or more budgets")
        out += [_multiplier(baseline, label, t, *pair, level, reason) for t in targets]
    return out


def _multiplier(baseline: str, label: str, target: float, base: LossLaw, other: LossLaw,
                level: float, reason: str) -> ComputeMultiplier:
    loss = base.loss(target)
    with np.errstate(invalid="ignore", over="ignore"):
        log_m = other.log_compute(loss) - math.log(target)
    samples = log_m[1:][~np.isnan(log_m[1:])]
    if samples.size:
        tail = (1 - level) / 2
        low, high = np.exp(np.quantile(samples, [tail, 1 - tail], method="inverted_cdf"))
    else:
        low = high = math.nan
    return ComputeMultiplier(
        baseline=baseline, label=label, target_budget=float(target), loss=float(loss[0]),
        multiplier=float(np.exp(log_m[0])), interval=(float(low), float(high)),
        excludes_one=bool(low > 1 or high < 1), source=base.source, level=level,
        resamples=int(samples.size), reason=reason)


def _label_seed(seed: int, label: str, source: str) -> int:
    """A stream per label, fixed by its name: other labels do not shift its resamples."""
    return zlib.crc32(f"{seed}/{label}/{source}".encode())


def _check(records: Mapping[str, Sequence[RunRow]], baseline: str,
           targets: Sequence[float], level: float) -> None:
    if baseline not in records:
        raise ValueError(f"baseline={baseline!r} is not a label of the records "
                         f"({', '.join(map(repr, records)) or 'none'}); pass one of them")
    if len(records) < 2:
        raise ValueError("records: a comparison needs 2 or more labels; add the runs of "
                         "another label")
    try:
        values = [float(t) for t in targets]
    except (TypeError, ValueError):
        values = [math.nan]
    if not values or not all(math.isfinite(t) and t > 0 for t in values):
        raise ValueError(f"targets={list(targets)!r}: give one or more positive FLOP budgets, "
                         "e.g. targets=[1e20]")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r}: give a coverage between 0 and 1, e.g. 0.95")


def _check_bootstrap(bootstrap: int) -> None:
    if not isinstance(bootstrap, int) or bootstrap < 0:
        raise ValueError(f"bootstrap={bootstrap!r}: give a count of resamples >= 0 "
                         "(e.g. 1000; 0 for no interval)")
