"""How far a scaling law is off beyond the runs' noise, measured by extrapolating it.

    from marin.scaling_laws.model_error import curvature_factor, model_error_from
    curvature_factor([2.5e10, 5e10], 1e11)          # -0.48: a unit bend's error at 1e11
    error = model_error_from(extrapolations)         # pooled over every label's backtests
    error.lean, error.curvature, error.dof           # the bends' mean and spread
    error.lean_at([2.5e10, 5e10, 1e11], 2e11)        # ln(predicted / true) to take out
    error.std_at([2.5e10, 5e10, 1e11], 2e11)         # relative error left at 2e11

A fit's interval and the run-to-run noise say how far one run lands from the law the fit
found, *if that law is the true shape*. A law that bends (its log-loss curving in log
compute, which the fitted form cannot follow) is off by more at every step it is
extrapolated, and neither term sees it. Backtests do: fit the law on all budgets but the
smallest (or the largest), predict the one left out, and compare. Each such
``Extrapolation`` has a relative error ``log_error = ln(predicted / achieved)`` and the part
of it the runs' noise explains (``noise_std``).

The model: the law's misfit is a bend ``kappa / 2 * (ln C)^2`` of the log-loss, with a
curvature ``kappa`` of its own for each label. A least-squares line in ln C through the
fitted budgets, extrapolated to ``C``, is then off by ``kappa * g``, where
``g = curvature_factor(fitted, C)`` depends only on where the budgets lie (a line reproduces
any linear term, so only the bend is left). The backtests run along the ladder
(``calibration.ladder_backtests``: without the smallest budget, then from the first k
budgets to each larger one), so a ladder of five budgets gives seven per label, at every
distance it spans. Over every backtest,

    log_error_i = lean * g_i + (kappa_label - lean) * g_i + noise_i

``lean`` (the bends' mean, a least-squares slope through the origin) is what every label's
law does as it extrapolates: the prediction is corrected by it
(``predicted * exp(-lean * g)``). The residuals' mean square beyond the noise is the
spread ``tau^2``, with a degree of freedom per backtest less the lean. A lean is applied
only where the labels agree on it: beyond Student's t (on the labels less one) times its
standard error, which counts each label's backtests as one cluster (they share its runs and
its bend). At a new budget the law's error then has standard deviation
``sqrt(tau^2 + lean_se^2) * |g(fitted, budget)|`` (relative).

Simulated three-label studies (``tests/test_model_error.py``; Approach 2 on IsoFLOP
sweeps with noise 0.005): the held-out runs inside their 95% intervals, the half-width,
and the mean error of the corrected prediction (uncorrected in brackets), at 2x past 3
budgets; 2x past 5 budgets over 16x; 8x past them:

- each label its own bend (sd 0.02): 98% +/-3.6% 1.28%; 100% +/-5.9% 2.6%; 100% +/-19% 8.4%
- small bends (sd 0.005): 92% +/-1.0% 0.37%; 95% +/-1.5% 0.66%; 96% +/-4.8% 2.1%
- a common lean (0.015 +/- 0.003): 96% +/-0.9% 0.65% (1.20%); 94% +/-0.9% 0.46% (2.5%);
  92% +/-2.6% 1.3% (8.1%)
- an irreducible loss: 96% +/-0.8% 0.58% (1.00%); 90% +/-0.7% 0.31% (1.9%);
  70% +/-1.6% 1.2% (5.6%)
- power laws: 96% +/-0.6% 0.19%; 96% +/-0.5% 0.20%; 97% +/-0.7% 0.24%

The correction cuts the error of a common lean by 5x to 6x where it is shown, and costs
nothing where there is none. Its limit: a power law fitted to ``E + K C^-0.25`` bends by a
curvature that itself changes past the ladder, which no backtest inside it sees, so 8x out
its interval covers 70%; Approach 3, which has an irreducible loss, is what a study
predicts with where it fits. A bend that grows beyond the swept budgets (a cubic term in
ln C) is likewise unseen.

Design notes:

- Approach 3's L(N, D) is not a line in ln C, but it cannot follow a bend either: fitted on
  a law with a known curvature, its backtests and its extrapolation to the next budget miss
  by 0.88 to 1.04 times ``kappa * g`` (a test checks this), so the same ``g`` serves both.
- The spread's degrees of freedom are the backtests' (less the lean), not the labels':
  with three labels on a ladder of five budgets that is 21 or 20 rather than 3, so
  Student's t is 2.1 rather than 3.2, and the interval can be narrow where the
  backtests agree. Only the lean, which the labels' backtests share, is judged by the labels.
- For Approach 3 only the left-out runs' noise is counted (a bootstrap of a five-parameter
  fit on two budgets is too unstable to subtract), so the smaller fit's own error stays in
  the estimate: the term errs wide rather than narrow.
- A curvature, not a percentage, is pooled: labels whose budgets lie differently, or a
  held-out budget further out, get the error their geometry implies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields, replace
from typing import Any, ClassVar

__all__ = ["Extrapolation", "ModelError", "check_version", "curvature_factor",
           "model_error_from"]


def check_version(data: Mapping[str, Any], cls: Any, what: str) -> None:
    """The format version, and every field, present: else one line saying which."""
    version = data.get("format_version")
    if version != cls.FORMAT:
        raise ValueError(f"{what}: format_version {version!r} is not {cls.FORMAT}; rewrite "
                         "it with this version of marin")
    missing = sorted({f.name for f in fields(cls) if f.default is MISSING} - set(data))
    if missing:
        raise ValueError(f"{what}: missing field(s) {', '.join(missing)}; it was not "
                         f"written by {cls.__name__}.to_json")


def curvature_factor(fitted_budgets: Sequence[float], budget: float) -> float:
    """``g``: how far a least-squares line in ln C through ``fitted_budgets`` is off at
    ``budget`` when the log-loss bends as ``(ln C)^2 / 2`` (negative: a convex bend is
    under-predicted outside the fitted range)."""
    x = sorted({math.log(b) for b in fitted_budgets if b > 0 and math.isfinite(b)})
    if len(x) < 2 or not (budget > 0 and math.isfinite(budget)):
        raise ValueError(f"fitted_budgets={list(fitted_budgets)!r}, budget={budget!r}: a line "
                         "needs 2 or more distinct positive budgets and a positive target")
    mean = sum(x) / len(x)
    centred = [v - mean for v in x]
    at = math.log(budget) - mean
    spread = sum(c * c for c in centred)
    # the line's prediction at `at` of f(c) = c^2 / 2: its mean plus slope * at
    line = sum(c * c / 2 for c in centred) / len(x) + at * sum(c**3 / 2 for c in centred) / spread
    return line - at * at / 2


@dataclass(frozen=True)
class Extrapolation:
    """One backtest: ``label``'s law fitted without ``budget`` (on ``fitted_budgets``),
    predicting it. ``predictor``: ``approach3`` (the loss of each of the budget's runs, at
    its own N and D; ``achieved_loss`` their mean) or ``approach2`` (the loss law against
    the budget's parabola minimum)."""

    FORMAT: ClassVar[int] = 1

    label: str
    budget: float
    fitted_budgets: tuple[float, ...]
    predictor: str
    runs: int
    predicted_loss: float
    achieved_loss: float
    log_error: float  # ln(predicted / achieved), the mean over the runs for approach3
    noise_std: float  # of log_error, from the runs' noise
    curvature_factor: float  # g(fitted_budgets, budget)

    def to_json(self) -> dict[str, Any]:
        return {"format_version": self.FORMAT,
                **{f.name: getattr(self, f.name) for f in fields(self)},
                "fitted_budgets": list(self.fitted_budgets)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Extrapolation:
        check_version(data, cls, "extrapolation")
        return cls(label=data["label"], budget=float(data["budget"]),
                   fitted_budgets=tuple(float(b) for b in data["fitted_budgets"]),
                   predictor=data["predictor"], runs=int(data["runs"]),
                   **{k: float(data[k]) for k in ("predicted_loss", "achieved_loss",
                                                   "log_error", "noise_std",
                                                   "curvature_factor")})


@dataclass(frozen=True)
class ModelError:
    """The labels' bends read from ``extrapolations`` backtests of ``labels``: their mean,
    the ``lean`` (per (ln C)^2, with its standard error ``lean_se``), and their spread
    around it, ``curvature`` (tau), estimated with ``dof`` degrees of freedom (the backtests
    less the lean)."""

    FORMAT: ClassVar[int] = 2
    OLDER: ClassVar[tuple[int, ...]] = (1,)  # no lean: read as a lean of 0

    curvature: float
    dof: int
    labels: tuple[str, ...]
    extrapolations: int
    raw_curvature: float  # before the noise's share is taken out
    lean: float = 0.0
    lean_se: float = 0.0

    def std_at(self, fitted_budgets: Sequence[float], budget: float) -> float:
        """The law's relative error (standard deviation) at ``budget``, once corrected by
        the lean: the spread of the bends and the lean's own uncertainty."""
        return math.hypot(self.curvature, self.lean_se) * abs(
            curvature_factor(fitted_budgets, budget))

    def lean_at(self, fitted_budgets: Sequence[float], budget: float) -> float:
        """How far the law leans at ``budget``, as ``ln(predicted / true)``: a prediction
        corrected by it is ``predicted * exp(-lean_at)``."""
        return self.lean * curvature_factor(fitted_budgets, budget)

    def to_json(self) -> dict[str, Any]:
        return {"format_version": self.FORMAT, "curvature": self.curvature, "dof": self.dof,
                "labels": list(self.labels), "extrapolations": self.extrapolations,
                "raw_curvature": self.raw_curvature, "lean": self.lean,
                "lean_se": self.lean_se}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelError:
        if data.get("format_version") not in cls.OLDER:
            check_version(data, cls, "model error")
        return cls(curvature=float(data["curvature"]), dof=int(data["dof"]),
                   labels=tuple(data["labels"]), extrapolations=int(data["extrapolations"]),
                   raw_curvature=float(data["raw_curvature"]),
                   lean=float(data.get("lean", 0.0)), lean_se=float(data.get("lean_se", 0.0)))


def model_error_from(extrapolations: Sequence[Extrapolation]) -> ModelError:
    """The bends' lean and spread from every backtest (see the module's text)."""
    found = []
    for e in extrapolations:
        if not all(math.isfinite(v) for v in (e.log_error, e.noise_std, e.curvature_factor)):
            raise ValueError(f"extrapolations: {e.label} at {e.budget:.3g} has a non-finite "
                             "error; leave it out")
        if e.curvature_factor != 0:
            found.append(e)
    if not found:
        raise ValueError("extrapolations: none with a bend to measure; a backtest needs a "
                         "label with 3 or more budgets")
    labels = tuple(dict.fromkeys(e.label for e in found))
    leaning = _fit(found, with_lean=len(found) >= 2 and len(labels) >= 2)
    if leaning.lean and not _shown(leaning, len(labels)):
        leaning = _fit(found, with_lean=False)
    return replace(leaning, labels=labels)


def _fit(found: Sequence[Extrapolation], with_lean: bool) -> ModelError:
    """The lean (a slope through the origin of the errors on their bends' factors) and the
    spread of what is left, beyond the noise."""
    g2 = sum(e.curvature_factor**2 for e in found)
    fitted = int(with_lean)
    lean = sum(e.curvature_factor * e.log_error for e in found) / g2 if fitted else 0.0
    residuals = [e.log_error - lean * e.curvature_factor for e in found]
    raw = len(found) / (len(found) - fitted) * sum(r * r for r in residuals) / g2
    tau2 = max(0.0, raw - sum(e.noise_std**2 for e in found) / g2)
    lean_se = 0.0
    if fitted:
        lean_se = math.sqrt(max(_lean_variance(found, residuals, g2),
                                sum(e.curvature_factor**2 * (tau2 * e.curvature_factor**2
                                                             + e.noise_std**2) for e in found)
                                / g2**2))
    return ModelError(curvature=math.sqrt(tau2), dof=len(found) - fitted, labels=(),
                      extrapolations=len(found), raw_curvature=math.sqrt(raw), lean=lean,
                      lean_se=lean_se)


def _shown(error: ModelError, labels: int) -> bool:
    """Whether the lean is beyond its error at 95%, with Student's t on the labels (less
    one): the backtests of a label lean together, so only the labels agreeing shows it."""
    from scipy import stats

    return abs(error.lean) > float(stats.t.ppf(0.975, labels - 1)) * error.lean_se

def _lean_variance(found: Sequence[Extrapolation], residuals: Sequence[float], g2: float
                   ) -> float:
    """The lean's variance with each label's backtests as one cluster (they share the
    label's runs and bend, so they are not independent): the sandwich estimate over the
    labels, 0 with one label."""
    sums: dict[str, float] = {}
    for e, r in zip(found, residuals, strict=True):
        sums[e.label] = sums.get(e.label, 0.0) + e.curvature_factor * r
    if len(sums) < 2:
        return 0.0
    return len(sums) / (len(sums) - 1) * sum(v * v for v in sums.values()) / g2**2
