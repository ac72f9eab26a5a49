"""Summaries of JAX profiles (XPlane traces): kernels, time categories, steps, hints.

    from marin.profiling import trace_summary
    summary = trace_summary.load("gs://bucket/train/run-1234")   # a step's output folder
    summary.top_kernels(3), summary.breakdown(), summary.steps(), summary.hints()

On the command line: ``marin trace summarize PATH`` and ``marin trace compare A B``.
"""

from marin.profiling import trace_summary

__all__ = ["trace_summary"]
