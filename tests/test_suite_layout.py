"""The test suite's own rules: no test module imports another (what several share lives in
``tests/helpers/`` or ``tests/conftest.py``), also in the scripts a test writes for a
subprocess, where a module may name itself (the script runs the module's own study); and in
CI (MARIN_FORBID_SKIPS=1) a skipped test fails the run.

    python3 dev.py test tests/test_suite_layout.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

_IMPORT = re.compile(r"^\s*(?:from\s+tests\.(test_\w+)\s+import|import\s+tests\.(test_\w+))",
                     re.MULTILINE)


def _imported_test_modules(source: str) -> set[str]:
    return {a or b for a, b in _IMPORT.findall(source)}


def test_no_test_module_imports_another():
    found = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        others = _imported_test_modules(path.read_text()) - {path.stem}
        if others:
            found[str(path.relative_to(ROOT))] = sorted(others)
    assert found == {}, f"move what these share into tests/helpers/: {found}"


def test_the_check_sees_each_spelling_of_such_an_import():
    source = ("from tests.test_a import x\nimport tests.test_b\n"
              'SCRIPT = """\nfrom tests.test_c import y\n"""\n'
              "from tests.helpers.corpus import plays\n# a comment on tests.test_d\n")
    assert _imported_test_modules(source) == {"test_a", "test_b", "test_c"}


@pytest.mark.slow
@pytest.mark.parametrize("forbid", ["1", ""])
def test_in_ci_a_skipped_test_fails_the_run_naming_it(tmp_path: Path, forbid: str):
    (tmp_path / "test_some.py").write_text(
        "import pytest\n\ndef test_skips():\n    pytest.skip('no reason')\n\n"
        "def test_passes():\n    pass\n")
    env = {**os.environ, "MARIN_FORBID_SKIPS": forbid, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "tests.conftest", str(tmp_path / "test_some.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "1 passed, 1 skipped" in out.stdout, out.stdout + out.stderr
    named = "which CI does not allow: test_some.py::test_skips" in out.stdout
    assert (out.returncode, named) == ((1, True) if forbid else (0, False)), out.stdout
