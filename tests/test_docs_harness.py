"""The documentation harness itself: a broken example fails, directives are honoured, and
every python and bash block of the docs is collected."""

from __future__ import annotations

import os
import runpy
import subprocess
import time
from pathlib import Path

import pytest

from marin.execution import StepGraph
from tests.doc_examples import LINKED, ROOT, DocsDirectiveError, docs_sybil, documented_file

PAGE = '''# A page

```python
import os
value = 41
```

```python
value += 1
assert value == 42, value
```

<!-- docs: excerpt -->
```python
result = undefined_name  # an excerpt is compiled, never run
```

```bash
echo "$((6 * 7))" > answer.txt
test "$(cat answer.txt)" = 42
```

<!-- docs: exit 3 -->
```bash
exit 3
```

```toml
not = "run"
```
'''


def _examples(tmp_path: Path, text: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    page = tmp_path / "page.md"
    page.write_text(text)
    document = docs_sybil().parse(page)
    document.namespace["docs_tmp_root"] = tmp_path / "scratch"
    return document, list(document.examples())


def _run_all(document, examples) -> None:
    try:
        for example in examples:
            example.evaluate()
    finally:
        page = document.namespace.pop("__docs_page__", None)
        if page is not None:
            page.stack.close()


def test_a_correct_page_passes_and_state_carries_between_blocks(tmp_path: Path):
    document, examples = _examples(tmp_path, PAGE)
    assert [e.parsed[0].language for e in examples] == ["python"] * 3 + ["bash"] * 2
    _run_all(document, examples)
    assert (tmp_path / "scratch" / "page.md" / "answer.txt").read_text().strip() == "42"


def test_an_excerpt_must_still_compile(tmp_path: Path):
    text = PAGE.replace("result = undefined_name", "def excerpt(...):")
    document, examples = _examples(tmp_path, text)
    with pytest.raises(SyntaxError):
        _run_all(document, examples)


@pytest.mark.parametrize("broken", ["value += 2", "import marin.no_such_module"])
def test_a_broken_python_example_fails(tmp_path: Path, broken: str):
    text = PAGE.replace("value += 1", broken)
    document, examples = _examples(tmp_path, text)
    with pytest.raises(AssertionError, match="the block raised"):
        _run_all(document, examples)


def test_a_failing_command_fails_with_its_output(tmp_path: Path):
    document, examples = _examples(tmp_path, "```bash\nmarin no-such-command\n```\n")
    with pytest.raises(AssertionError, match=r"exit 2 \(expected 0\)"):
        _run_all(document, examples)


def test_an_unknown_directive_names_the_page_and_line(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- docs: skip-this -->\n```python\npass\n```\n")
    with pytest.raises(DocsDirectiveError, match=r"page.md:4: unknown docs directive"):
        list(docs_sybil().parse(page).examples())


def test_every_documentation_block_is_collected():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        fences = sum(1 for line in page.read_text().splitlines()
                     if line.lstrip(" >-*0123456789.").startswith(("```python", "```bash")))
        assert len(list(docs_sybil().parse(page).examples())) == fences, page


def test_exported_variables_stay_set_for_later_blocks(tmp_path: Path):
    text = ("```bash\nexport GREETING=hello\n```\n\n```bash\ntest \"$GREETING\" = hello\n```\n"
            "\n```python\nimport os\nassert os.environ['GREETING'] == 'hello'\n```\n")
    document, examples = _examples(tmp_path, text)
    _run_all(document, examples)
    broken = text.replace("export GREETING=hello", "GREETING=hello")  # not exported
    document, examples = _examples(tmp_path / "again", broken)
    with pytest.raises(AssertionError):
        _run_all(document, examples)


def test_a_block_that_times_out_takes_its_background_processes_with_it(tmp_path: Path,
                                                                      monkeypatch):
    monkeypatch.setattr("tests.doc_examples.BASH_TIMEOUT_S", 2)
    text = "```bash\nsleep 300 &\necho $! > child.pid\nwait\n```\n"
    document, examples = _examples(tmp_path, text)
    with pytest.raises(AssertionError, match="timed out after 2 s"):
        _run_all(document, examples)
    child = int(next((tmp_path / "scratch").rglob("child.pid")).read_text())
    for _ in range(200):  # SIGKILL is delivered at once, but the process may take a moment
        if not _running(child):
            break
        time.sleep(0.05)
    assert not _running(child)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a killed one waiting to be reaped is not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X")


def _step_outputs(experiment: Path) -> dict[str, str]:
    """Load ``experiment`` as ``marin executor`` does (its module code, not its main) and
    give each step's output folder, which carries the step's version."""
    steps = runpy.run_path(str(experiment), run_name="docs_experiment")["steps"]
    graph = StepGraph.build(steps, str(experiment.parent / "local_store"))
    return {node.step.name: node.output_path for node in graph.nodes}


@pytest.mark.parametrize("page", ["docs/profiling.md", "docs/training.md"])
def test_the_documented_experiment_rewrites_its_input_only_when_it_changed(
        page: str, tmp_path: Path, monkeypatch):
    """Loading ``train_tiny.py`` again leaves an unchanged ``topics.txt`` alone, so the
    tokenize step keeps its version and a second run skips (an edited file is restored)."""
    experiment = tmp_path / "train_tiny.py"
    experiment.write_text(documented_file(ROOT / page, "train_tiny.py"))
    monkeypatch.chdir(tmp_path)
    first = _step_outputs(experiment)
    assert _step_outputs(experiment) == first
    topics = tmp_path / "topics.txt"
    text = topics.read_text()
    long_ago = 10**18  # 2001, in nanoseconds: any rewrite moves it
    os.utime(topics, ns=(long_ago, long_ago))
    _step_outputs(experiment)
    assert topics.stat().st_mtime_ns == long_ago
    topics.write_text("edited")
    _step_outputs(experiment)
    assert topics.read_text() == text


def test_what_a_page_leaves_running_is_stopped_when_the_page_ends(tmp_path: Path):
    text = ("```bash\nsleep 300 > /dev/null 2>&1 &\necho $! > server.pid\n```\n\n"
            "```bash\nkill -0 \"$(cat server.pid)\"   # still serving for the next block\n```\n")
    document, examples = _examples(tmp_path, text)
    _run_all(document, examples)
    server = int(next((tmp_path / "scratch").rglob("server.pid")).read_text())
    for _ in range(200):
        if not _running(server):
            break
        time.sleep(0.05)
    assert not _running(server)


def test_an_emulator_address_the_page_exports_itself_stays_set(tmp_path: Path):
    text = ("```bash\nexport STORAGE_EMULATOR_HOST=http://127.0.0.1:4443\n```\n\n"
            "```bash\ntest \"$STORAGE_EMULATOR_HOST\" = http://127.0.0.1:4443\n```\n")
    document, examples = _examples(tmp_path, text)
    _run_all(document, examples)


@pytest.mark.slow  # real `marin` processes
def test_what_the_readme_commands_write_in_the_checkout_is_ignored_by_git(tmp_path: Path):
    """Run the README's blocks as a reader would in the checkout (here a scratch folder
    laid out like one) and ask git whether each thing they left there is ignored."""
    assert subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True
                          ).returncode == 0, f"{ROOT} is no git checkout: run the suite in a clone"
    document, examples = _examples(tmp_path, (ROOT / "README.md").read_text())
    _run_all(document, examples)
    (workdir,) = (tmp_path / "scratch").iterdir()
    saved = {e.parsed[0].file_name for e in examples} - {""}  # files the reader saves
    harness = {".python-blocks.log", ".docs-env", *LINKED}
    written = sorted(p.name + ("/" if p.is_dir() else "") for p in workdir.iterdir()
                     if p.name not in saved | harness)
    assert "runs/" in written  # the README's --prefix runs example
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", *written],
                             capture_output=True, text=True).stdout.split()
    assert [w for w in written if w not in ignored] == []
