"""Collects the documentation's code blocks as tests (see tests/doc_examples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doc_examples import docs_sybil, ledger_summary

pytest_collect_file = docs_sybil().pytest()


@pytest.fixture(scope="session")
def docs_tmp_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("docs")


def pytest_terminal_summary(terminalreporter) -> None:
    lines = ledger_summary()
    if lines:
        terminalreporter.section(f"documentation blocks ({len(lines)})")
        for line in lines:
            terminalreporter.write_line(line)
