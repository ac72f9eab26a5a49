"""Garbage collection of a prefix: ``marin gc``, ``marin du``, pins.

    from marin.execution.gc import Retention, run_gc

    run = run_gc(prefix, Retention(keep_last=1), older_than=0)   # a dry run: nothing deleted

The modules, each one rule set: ``scan`` (what a prefix holds), ``reach`` (what counts as a
step output, a nested prefix, a key), ``retention`` (which invocations are kept), ``pins``
(outputs kept whatever the records say), ``collector`` (what goes, and deleting it), ``log``
(the record of what was deleted), ``usage`` (what a prefix holds and what gc would free).
gc builds on the executor's core (its records, leases and the prefix guard); nothing in the
core imports gc.
"""

from marin.execution.gc.collector import (
    GRACE_SECONDS,
    Candidate,
    GcRun,
    collect,
    delete,
    parse_age,
    run_gc,
)
from marin.execution.gc.retention import Retention

__all__ = ["GRACE_SECONDS", "Candidate", "GcRun", "Retention", "collect", "delete",
           "parse_age", "run_gc"]
