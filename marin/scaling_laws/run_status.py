"""How a study's training run ended, as its files record it (``outcome.json``,
``prediction.json``, ``runs.csv``, ``fit.json``'s excluded runs).

    from marin.scaling_laws.run_status import RunStatus
    RunStatus("diverged") is RunStatus.DIVERGED        # read from a file
    row.status is RunStatus.OK, f"{RunStatus.NO_LOSS}"  # "no_loss": written as the string

A ``StrEnum``: each member is its string, so files keep today's strings and a member
compares equal to the string it is (``RunStatus.OK == "ok"``).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["RunStatus"]


class RunStatus(StrEnum):
    """How a run ended, or why the fits leave it out.

    ``OK``: trained and recorded the metric. ``DIVERGED``, ``OUT_OF_MEMORY``,
    ``INVALID_CONFIG``: training stopped with that error. ``NO_LOSS``: trained, but recorded
    no finite value of the study's metric. ``MISSING``: left no ``outcome.json``.
    ``INVALID``: figures that are not positive and finite (a row of a table).
    ``NOT_PREDICTED``: a prediction whose fit gave no optimum, so nothing was trained.
    ``REGISTERED``: a prediction written before its run, which has not ended yet.
    """

    OK = "ok"
    DIVERGED = "diverged"
    OUT_OF_MEMORY = "out_of_memory"
    INVALID_CONFIG = "invalid_config"
    NO_LOSS = "no_loss"
    MISSING = "missing"
    INVALID = "invalid"
    NOT_PREDICTED = "not_predicted"
    REGISTERED = "registered"
