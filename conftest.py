"""Collects the documentation's code blocks as tests (see tests/doc_examples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doc_examples import docs_sybil, ledger_summary

pytest_collect_file = docs_sybil().pytest()


@pytest.fixture(scope="session")
def docs_tmp_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("docs")


def pytest_collection_modifyitems(items) -> None:
    """A page's blocks share its state (files, exported variables), so the fast lane
    (``-m "not slow"``) leaves out every page: each documentation block is marked slow."""
    for item in items:
        if item.path.suffix == ".md":
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter) -> None:
    lines = ledger_summary()
    if lines:
        terminalreporter.section(f"documentation blocks ({len(lines)})")
        for line in lines:
            terminalreporter.write_line(line)
