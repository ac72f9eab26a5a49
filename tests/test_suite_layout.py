"""The test suite's own layout: no test module imports another (what several share lives in
``tests/helpers/`` or ``tests/conftest.py``), also in the scripts a test writes for a
subprocess; a module may name itself there (the script runs the module's own study).

    python3 dev.py test tests/test_suite_layout.py
"""

from __future__ import annotations

import re

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
