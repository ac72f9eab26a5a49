"""A loss-to-loss law, ``L_y = K * (L_x - E_x) ** kappa + E_y`` (Brandfonbrener et al. 2024,
"Loss-to-Loss Prediction"), and its predictions: the values, without the fit.

    law = fit_loss_to_loss(x_runs, y_runs)        # marin.scaling_laws.loss_to_loss
    law.K, law.kappa, law.E_x, law.E_y, law.runs  # the parameters and the runs behind them
    law.standard_errors["kappa"]                  # from the bootstrap over runs
    law.not_identified                            # ("E_x",): parameters the runs leave free
    p = law.predict(3.1)                          # L_y at L_x = 3.1
    p.predicted, p.interval                       # and its 95% prediction interval

The fit (``marin.scaling_laws.loss_to_loss``) returns a ``LossToLoss``. This module imports
no numpy: the numeric methods import it when they are called.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LEVEL", "LOSS_TO_LOSS_PARAMETERS", "NOT_IDENTIFIED_RATIO", "LossToLoss",
           "LossToLossError", "LossToLossPrediction"]

LOSS_TO_LOSS_PARAMETERS = ("K", "kappa", "E_x", "E_y")  # in the bootstrap samples' order
LEVEL = 0.95  # of the prediction intervals, unless asked otherwise
# A parameter whose bootstrap standard error is above this many times its value is not
# identified by the runs, the rule the study applies to Approach 3's parameters.
NOT_IDENTIFIED_RATIO = 10.0

Interval = tuple[float, float]


class LossToLossError(ValueError):
    """The runs cannot be fitted (too few, unpaired, non-finite, no convergence) or a
    prediction cannot be made; the message says which run or value and the fix."""


@dataclass(frozen=True)
class LossToLossPrediction:
    """``L_y`` predicted at one ``L_x``.

    Attributes:
        loss_x: the loss on the first distribution the prediction is made at.
        predicted: the law's ``L_y`` there, with the fitted parameters.
        interval: where a new run's ``L_y`` lies with the requested probability (95% by
            default): the bootstrap's laws at ``loss_x`` plus the runs' scatter about the
            law; ``(nan, nan)`` for a fit without a bootstrap.
    """

    loss_x: float
    predicted: float
    interval: Interval

    def within(self, loss_y: float) -> bool:
        """Whether ``loss_y`` (a run's achieved loss) lies inside ``interval``."""
        low, high = self.interval
        return low <= loss_y <= high


@dataclass(frozen=True, kw_only=True)
class LossToLoss:
    """``L_y = K * (L_x - E_x) ** kappa + E_y`` across runs, with bootstrap errors.

    Attributes:
        K: the law's scale (positive: the two losses rise together).
        kappa: its exponent (positive).
        E_x: the shift of ``L_x``, between 0 and the smallest fitted ``L_x``: the first
            distribution's irreducible loss as far as this law sees it.
        E_y: the loss ``L_y`` tends to as ``L_x`` tends to ``E_x`` (not negative).
        runs: the number of paired runs fitted.
        standard_errors: each parameter's standard deviation over the bootstrap resamples
            (by name; empty without a bootstrap).
        residual_sd: the runs' root-mean-square scatter of ``L_y`` about the law, scaled
            by ``sqrt(n / (n - 4))`` for the four fitted parameters.
        loss_x_range: the smallest and largest fitted ``L_x``.
        bootstrap_samples: each resample's (K, kappa, E_x, E_y).
        noise: one draw of the runs' scatter per resample (a rescaled residual of the
            fit), added to that resample's law in a prediction interval.
        at_bound: the parameters the fit left at a bound of their range (``E_x`` at 0 or
            at the smallest fitted ``L_x``, ``E_y`` at 0): the runs do not pin them down.
        x_name: what ``L_x`` is (a metric such as ``plays/bpb`` or a label); may be empty.
        y_name: what ``L_y`` is.
    """

    K: float
    kappa: float
    E_x: float
    E_y: float
    runs: int
    standard_errors: dict[str, float] = field(default_factory=dict)
    residual_sd: float = math.nan
    loss_x_range: Interval = (math.nan, math.nan)
    bootstrap_samples: tuple[tuple[float, ...], ...] = ()
    noise: tuple[float, ...] = ()
    at_bound: tuple[str, ...] = ()
    x_name: str = ""
    y_name: str = ""

    @property
    def parameters(self) -> dict[str, float]:
        """The four parameters by name."""
        return {name: getattr(self, name) for name in LOSS_TO_LOSS_PARAMETERS}

    @property
    def not_identified(self) -> tuple[str, ...]:
        """The parameters the runs leave free: at a bound of their range, or with a
        standard error above ``NOT_IDENTIFIED_RATIO`` times the value or not finite."""
        def free(name: str, value: float) -> bool:
            se = self.standard_errors.get(name, 0.0)
            return name in self.at_bound or not (math.isfinite(se)
                                                 and se <= NOT_IDENTIFIED_RATIO * abs(value))

        return tuple(name for name, value in self.parameters.items() if free(name, value))

    def loss_y(self, loss_x: Any) -> Any:
        """The law at ``loss_x`` (a number or a numpy array); ``E_y`` at or below ``E_x``."""
        import numpy as np

        value = _law(np.asarray(self.K), np.asarray(self.kappa), np.asarray(self.E_x),
                     np.asarray(self.E_y), np.asarray(loss_x, dtype=float))
        return float(value) if np.ndim(value) == 0 else value

    def predict(self, loss_x: float, level: float = LEVEL) -> LossToLossPrediction:
        """``L_y`` at ``loss_x`` with its prediction interval at ``level``; ``loss_x`` must
        lie above ``E_x``."""
        import numpy as np

        if not (isinstance(loss_x, (int, float)) and math.isfinite(loss_x)):
            raise LossToLossError(f"loss_x={loss_x!r}: give a finite loss to predict from")
        if not 0 < level < 1:
            raise LossToLossError(f"level={level!r}: give a probability between 0 and 1, "
                                  "such as 0.95")
        if loss_x <= self.E_x:
            raise LossToLossError(f"loss_x={loss_x:.6g} is at or below the law's E_x="
                                  f"{self.E_x:.6g}, where it only gives its floor E_y; pair "
                                  "runs that reach lower L_x")
        interval = (math.nan, math.nan)
        samples = np.array(self.bootstrap_samples, dtype=float)
        if samples.ndim == 2 and len(samples) >= 2:
            with np.errstate(over="ignore"):  # a free parameter's resample may overflow
                draws = _law(*samples.T, float(loss_x)) + np.asarray(self.noise, dtype=float)
            tail = (1 - level) / 2 * 100
            low, high = np.percentile(draws, [tail, 100 - tail])
            interval = (float(low), float(high))
        return LossToLossPrediction(float(loss_x), float(self.loss_y(float(loss_x))), interval)


def _law(K: Any, kappa: Any, E_x: Any, E_y: Any, loss_x: Any) -> Any:
    """``K * max(L_x - E_x, 0) ** kappa + E_y`` elementwise (numpy arrays broadcast)."""
    import numpy as np

    return K * np.maximum(loss_x - E_x, 0.0) ** kappa + E_y
