"""A folder that appears whole or not at all: the export's destination.

    with new_folder("exports/tiny", force=False) as tmp:   # ExportError if it holds files
        (tmp / "config.json").write_text("{}")
    # now exports/tiny holds config.json; on an exception it is as it was before

The files are written into a hidden folder beside the destination
(``.NAME.partial-XXXX``), which is renamed into place once every file is written and
synced. A destination that exists and holds anything is refused unless ``force``; then the
old folder is renamed aside (``.NAME.replaced-XXXX``), the new one renamed into place, and
only then the old one deleted, so at every moment ``NAME`` is either the old export or the
new one, complete. A run killed in the middle leaves at most a hidden ``.partial`` or
``.replaced`` folder, never a destination that looks complete and is not.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from marin.export.protected import check_unprotected
from marin.export.run import ExportError
from marin.storage.files import is_local, local_path

__all__ = ["check_destination", "new_folder"]


def check_destination(destination: str, force: bool = False) -> str:
    """The absolute path of ``destination``; ``ExportError`` when it cannot take an export
    (not local, a link, a file, under a file, a folder with files and no ``force``, or a
    step output, attempt or prefix records folder, inside one or holding one:
    ``marin.export.protected``)."""
    target = _local(destination)
    if os.path.lexists(target) and not os.path.isdir(target):
        raise ExportError(f"OUT {destination} exists and is not a folder: choose another OUT")
    check_unprotected(target, destination)
    if not force and os.path.isdir(target) and any(os.scandir(target)):
        raise ExportError(f"OUT {destination} exists and is not empty: choose another OUT, "
                          "or pass --force to replace it")
    return target


@contextlib.contextmanager
def new_folder(destination: str, force: bool = False) -> Iterator[Path]:
    """A scratch folder whose files become ``destination`` when the block ends cleanly."""
    target = check_destination(destination, force)
    parent, name = os.path.split(target)
    try:
        os.makedirs(parent, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=parent)
    except OSError as e:
        raise ExportError(f"OUT {destination}: cannot create a folder in {parent} "
                          f"({e.strerror}); choose another OUT") from None
    try:
        yield Path(scratch)
        _sync(scratch)
        _publish(scratch, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _local(destination: str) -> str:
    if not is_local(destination):
        raise ExportError(f"OUT {destination} is not a local folder: export to a local path "
                          "(transformers loads from one), then copy it where it belongs")
    path = local_path(destination) or destination
    target = os.path.abspath(path)
    if os.path.islink(target):
        raise ExportError(f"OUT {destination} is a symbolic link: pass the folder it points "
                          "to, or another OUT")
    return target


def _publish(scratch: str, target: str) -> None:
    parent, name = os.path.split(target)
    if not os.path.isdir(target):
        os.rename(scratch, target)
        return
    if not any(os.scandir(target)):  # an empty folder: nothing to keep
        os.rmdir(target)
        os.rename(scratch, target)
        return
    aside = tempfile.mkdtemp(prefix=f".{name}.replaced-", dir=parent)
    os.rmdir(aside)  # the name only: the old export is renamed to it
    os.rename(target, aside)
    try:
        os.rename(scratch, target)
    except OSError:
        os.rename(aside, target)  # the old export goes back where it was
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _sync(folder: str) -> None:
    """Give the folder and its files the modes a plain ``mkdir`` and ``open`` would (a
    temporary folder is private), then flush them, so that the rename publishes written
    data."""
    umask = os.umask(0o022)
    os.umask(umask)
    os.chmod(folder, 0o777 & ~umask)
    for entry in os.scandir(folder):
        if entry.is_file(follow_symlinks=False):
            os.chmod(entry.path, 0o666 & ~umask)
            fd = os.open(entry.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
