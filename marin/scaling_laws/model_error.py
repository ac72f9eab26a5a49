"""How far a scaling law is off beyond the runs' noise, measured by extrapolating it.

    from marin.scaling_laws.model_error import curvature_factor, model_error_from
    curvature_factor([2.5e10, 5e10], 1e11)          # -0.48: a unit bend's error at 1e11
    error = model_error_from(extrapolations)         # pooled over the labels' backtests
    error.curvature, error.dof                       # 0.0076 per (ln C)^2, 3 labels
    error.std_at([2.5e10, 5e10, 1e11], 2e11)         # 0.0061: relative error at 2e11

A fit's interval and the run-to-run noise say how far one run lands from the law the fit
found, *if that law is the true shape*. A law that bends (its log-loss curving in log
compute, which the fitted form cannot follow) is off by more at every step it is
extrapolated, and neither term sees it. Backtests do: fit the law on all budgets but the
smallest (or the largest), predict the one left out, and compare. Each such
``Extrapolation`` has a relative error ``log_error = ln(predicted / achieved)`` and the part
of it the runs' noise explains (``noise_std``).

The model: the law's misfit is a bend ``kappa / 2 * (ln C)^2`` of the log-loss, with a
curvature ``kappa`` of its own for each label, drawn with spread ``tau``. A least-squares
line in ln C through the fitted budgets, extrapolated to ``C``, is then off by ``kappa * g``,
where ``g = curvature_factor(fitted, C)`` depends only on where the budgets lie (a line
reproduces any linear term, so only the bend is left). So each label's backtests give an
estimate of its curvature, ``kappa_hat = mean(log_error / g)``, and over the labels

    tau^2 = max(0, mean over labels of (kappa_hat^2 - its noise variance))

with ``dof`` = the number of labels: a label's backtests share its runs and its bend, so
they count once. At a new budget the law's error has standard deviation
``tau * |g(fitted, budget)|`` (relative), and an interval gives it Student's t quantile
with ``dof`` degrees of freedom, since ``tau`` is estimated from that many labels.

Simulated three-label studies on the main job's budgets (``tests/test_model_error.py``):
held-out runs fall inside their 95% intervals 96% of the time for power laws (95% without
this term), 93% for bends about as large as the backtests' noise, and 99% for large bends
or an irreducible loss (the fit's spread and the noise alone: 23% and 4%). It errs wide
there because a label's own bend is part of the pooled estimate. A bend that itself grows
beyond the swept budgets (a cubic term in ln C) is not seen by any backtest: 84%.

Design notes:

- Approach 3's L(N, D) is not a line in ln C, but it cannot follow a bend either: fitted on
  a law with a known curvature, its backtests and its extrapolation to the next budget miss
  by 0.88 to 1.04 times ``kappa * g`` (a test checks this), so the same ``g`` serves both.
- A label's backtests are combined as if their noise were fully correlated: for Approach 2
  on three budgets it is (both are the same second difference of the minima). For
  Approach 3 only the left-out runs' noise is counted (a bootstrap of a five-parameter fit
  on two budgets is too unstable to subtract), so the smaller fit's own error stays in the
  estimate: the term errs wide rather than narrow.
- A curvature, not a percentage, is pooled: labels whose budgets lie differently, or a
  held-out budget further out, get the error their geometry implies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
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
    """The spread ``curvature`` (tau, per (ln C)^2) of the labels' bends, from
    ``extrapolations`` backtests of ``labels`` (``dof`` = their number)."""

    FORMAT: ClassVar[int] = 1

    curvature: float
    dof: int
    labels: tuple[str, ...]
    extrapolations: int
    raw_curvature: float  # before the noise's share is taken out

    def std_at(self, fitted_budgets: Sequence[float], budget: float) -> float:
        """The law's relative error (standard deviation) at ``budget``."""
        return self.curvature * abs(curvature_factor(fitted_budgets, budget))

    def to_json(self) -> dict[str, Any]:
        return {"format_version": self.FORMAT, "curvature": self.curvature, "dof": self.dof,
                "labels": list(self.labels), "extrapolations": self.extrapolations,
                "raw_curvature": self.raw_curvature}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelError:
        check_version(data, cls, "model error")
        return cls(curvature=float(data["curvature"]), dof=int(data["dof"]),
                   labels=tuple(data["labels"]), extrapolations=int(data["extrapolations"]),
                   raw_curvature=float(data["raw_curvature"]))


def model_error_from(extrapolations: Sequence[Extrapolation]) -> ModelError:
    """The labels' curvature spread from their backtests (see the module's text)."""
    by_label: dict[str, list[Extrapolation]] = {}
    for e in extrapolations:
        if not all(math.isfinite(v) for v in (e.log_error, e.noise_std, e.curvature_factor)):
            raise ValueError(f"extrapolations: {e.label} at {e.budget:.3g} has a non-finite "
                             "error; leave it out")
        if e.curvature_factor != 0:
            by_label.setdefault(e.label, []).append(e)
    if not by_label:
        raise ValueError("extrapolations: none with a bend to measure; a backtest needs a "
                         "label with 3 or more budgets")
    squares, noise = [], []
    for found in by_label.values():
        squares.append((sum(e.log_error / e.curvature_factor for e in found) / len(found)) ** 2)
        noise.append((sum(e.noise_std / abs(e.curvature_factor) for e in found)
                      / len(found)) ** 2)
    raw = sum(squares) / len(squares)
    excess = max(0.0, raw - sum(noise) / len(noise))
    return ModelError(curvature=math.sqrt(excess), dof=len(by_label),
                      labels=tuple(by_label), extrapolations=sum(map(len, by_label.values())),
                      raw_curvature=math.sqrt(raw))
