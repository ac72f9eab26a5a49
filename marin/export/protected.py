"""Folders an export must never write into, replace or delete: step outputs, their attempt
folders, and a prefix's ``.marin`` records.

    check_unprotected("/abs/exports/tiny", "exports/tiny")   # ExportError when it is one

A folder is a step output when the executor's records lie at its own top level
(``.executor_status``, ``.executor_info``, ``.executor_lease`` or the ``.attempts``
folder); an attempt folder is any folder inside ``.attempts``; ``.marin`` holds a
prefix's invocations, pins and locks. An export's folder may be none of these, lie inside
none of them, and hold none of them at any depth: ``--force`` renames the old folder aside
and deletes it, which would take a training run, or every run of a prefix, with it.
"""

from __future__ import annotations

import os

from marin.execution.status import ATTEMPTS_FOLDER, INFO_FILE, LEASE_FILE, STATUS_FILE
from marin.export.run import ExportError

__all__ = ["check_unprotected", "protected_kind"]

PREFIX_RECORDS = ".marin"
_OUTPUT_RECORDS = (STATUS_FILE, INFO_FILE, LEASE_FILE, ATTEMPTS_FOLDER)
_FIX = "export to a folder of its own, outside every step output and prefix (such as exports/NAME)"


def protected_kind(folder: str, names: list[str] | None = None) -> str | None:
    """What ``folder`` is to the executor ("a step output", "an attempt folder", "a
    prefix's .marin records"), or None for a folder of no step. ``names``: its entries,
    when the caller has listed it already (else the records are looked up by name, which
    needs no right to list the folder)."""
    base = os.path.basename(folder)
    if base == PREFIX_RECORDS:
        return f"a prefix's {PREFIX_RECORDS} records"
    if os.path.basename(os.path.dirname(folder)) == ATTEMPTS_FOLDER:
        return "an attempt folder"
    found = (any(os.path.lexists(os.path.join(folder, name)) for name in _OUTPUT_RECORDS)
             if names is None else any(name in _OUTPUT_RECORDS for name in names))
    return "a step output" if found else None


def check_unprotected(target: str, shown: str) -> None:
    """``ExportError`` (one line, naming the folder) unless the absolute path ``target``
    (``shown`` as the user typed it) is, lies inside and holds no protected folder, and its
    nearest existing ancestor is a folder."""
    real = os.path.realpath(target)
    _check_ancestors(real, shown)
    if os.path.isdir(real):
        _check_contents(real, shown)


def _check_ancestors(real: str, shown: str) -> None:
    folder, first = real, True
    while True:
        if os.path.lexists(folder) and not os.path.isdir(folder) and not first:
            raise ExportError(f"OUT {shown}: {folder} is a file, not a folder, so OUT cannot "
                              "be made under it; choose another OUT")
        kind = protected_kind(folder) if os.path.isdir(folder) else None
        if kind is not None:
            where = "is" if first else f"lies inside {folder},"
            raise ExportError(f"OUT {shown} {where} {kind}: an export there would replace or "
                              f"mix with the executor's files; {_FIX}")
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder, first = parent, False


def _check_contents(real: str, shown: str) -> None:
    for folder, dirs, files in os.walk(real):  # links are not followed
        kind = protected_kind(folder, dirs + files) if folder != real else None
        if kind is not None:
            raise ExportError(f"OUT {shown} contains {kind}, {folder}, which replacing OUT "
                              f"would delete; {_FIX}")
