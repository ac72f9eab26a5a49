"""Every fenced ``python`` and ``bash`` block in README.md and docs/ runs as a test.

    python3 dev.py test README.md docs/                 # only the documentation
    python3 dev.py test docs/executor.md -k "line:40"   # one block

Collection is Sybil's (the root ``conftest.py`` hands it ``pytest_collect_file``); this
module decides how each block is run. Blocks of one page share state the way a reader's
session does: Python blocks share one namespace, and every block of a page runs in the
same scratch folder, where ``experiments/`` and ``plugins/`` link to the repository so
that ``python experiments/hello_pipeline.py`` works as written and ``./local_store``
lands in the scratch folder, never in the working tree.

An HTML comment right before a block changes how it runs (several are joined by ``;``):

``<!-- docs: excerpt -->``
    a deliberate fragment: checked for syntax only (``compile`` / ``bash -n``).
``<!-- docs: needs gpu -->`` (or ``tpu``, ``cloud-credentials``, ``ray-cluster``)
    needs what CI lacks: checked for syntax only, and listed as such in the summary.
``<!-- docs: gcs-emulator -->`` / ``<!-- docs: s3-emulator -->``
    runs with the GCS (fake-gcs-server) or S3 (moto) emulator standing in; every
    ``gs://NAME`` or ``s3://NAME`` in the block is created as a bucket first.
``<!-- docs: file NAME -->``
    a Python block that is a whole file: written to NAME in the scratch folder and
    compiled; later blocks run it (``python NAME ...``).
``<!-- docs: exit N -->``
    the bash block must exit with status N (a documented error).

Bash blocks whose lines start with ``$ `` are transcripts: only those lines run and the
rest is the output shown to the reader. Other languages (``toml``, plain fences) are text.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

ROOT = Path(__file__).resolve().parent.parent
LINKED = ("experiments", "plugins")
SYNTAX_ONLY_NEEDS = {"gpu", "tpu", "cloud-credentials", "ray-cluster"}
BASH_TIMEOUT_S = 600
_DIRECTIVE = re.compile(r"<!--\s*docs:\s*(?P<body>(?:(?!-->).)*?)\s*-->\s*\Z", re.DOTALL)
_BUCKET = {"gcs-emulator": re.compile(r"gs://([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])"),
           "s3-emulator": re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])")}
LEDGER: list[tuple[str, int, str, str]] = []  # (file, line, language, how it was checked)


class DocsDirectiveError(ValueError):
    pass


@dataclass
class BlockPlan:
    """How one block runs, from the directives written before it."""

    language: str
    syntax_only: str = ""  # the reason, when the block is only compiled
    emulators: tuple[str, ...] = ()
    file_name: str = ""
    expected_exit: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def how(self) -> str:
        if self.syntax_only:
            return f"syntax only ({self.syntax_only})"
        return "ran" + (f" with {', '.join(self.emulators)}" if self.emulators else "")


def parse_directives(language: str, body: str, where: str) -> BlockPlan:
    plan = BlockPlan(language)
    for part in filter(None, (p.strip() for p in body.split(";"))):
        word, _, rest = part.partition(" ")
        rest = rest.strip()
        if word == "excerpt":
            plan.syntax_only = "excerpt"
        elif word == "needs" and rest in SYNTAX_ONLY_NEEDS:
            plan.syntax_only = f"needs {rest}"
        elif word in _BUCKET:
            plan.emulators += (word,)
        elif word == "file" and rest and language == "python":
            plan.file_name = rest
        elif word == "exit" and rest.isdigit():
            plan.expected_exit = int(rest)
        else:
            raise DocsDirectiveError(
                f"{where}: unknown docs directive {part!r}; use excerpt, needs "
                f"{'|'.join(sorted(SYNTAX_ONLY_NEEDS))}, gcs-emulator, s3-emulator, "
                "file NAME (python) or exit N")
    return plan


def _directive_before(document: Document, start: int) -> str:
    match = _DIRECTIVE.search(document.text[:start])
    return match.group("body") if match else ""


class DocBlockParser:
    """Finds the fenced blocks of a page and gives each the evaluator its directives ask."""

    languages = {"python", "bash"}

    def __init__(self) -> None:
        self._lexer = FencedCodeBlockLexer(language=r"[\w+-]*")

    def __call__(self, document: Document) -> Iterator[Region]:
        for region in self._lexer(document):
            language = region.lexemes["language"]
            if language not in self.languages:
                continue
            line = document.text.count("\n", 0, region.start) + 1
            where = f"{Path(document.path).name}:{line}"
            plan = parse_directives(language, _directive_before(document, region.start),
                                    where)
            region.parsed = (plan, str(region.lexemes["source"]))
            region.evaluator = _evaluate
            yield region


def _evaluate(example: Example) -> None:
    plan, source = example.parsed
    page = _page_state(example)
    rel = os.path.relpath(example.path, ROOT)
    LEDGER.append((rel, example.line, plan.language, plan.how))
    if plan.language == "python":
        _python(plan, source, example, page)
    else:
        _bash(plan, source, example, page)


@dataclass
class PageState:
    """What the blocks of one page share: a scratch folder and the environment."""

    workdir: Path
    env: dict[str, str]
    stack: ExitStack
    endpoints: dict[str, str] = field(default_factory=dict)


def _page_state(example: Example) -> PageState:
    namespace = example.namespace
    if "__docs_page__" not in namespace:
        page = Path(example.path).resolve().relative_to(ROOT)
        workdir = namespace["docs_tmp_root"] / re.sub(r"[^\w.-]", "_", str(page))
        workdir.mkdir(parents=True)
        namespace["__docs_page__"] = new_page_state(workdir)
    return namespace["__docs_page__"]


def new_page_state(workdir: Path) -> PageState:
    """A scratch folder that looks like a checkout to the commands of a page."""
    for name in LINKED:
        (workdir / name).symlink_to(ROOT / name, target_is_directory=True)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("MARIN_PREFIX", None)
    env.update(PYTHONUNBUFFERED="1", NO_GCE_CHECK="true", GCE_METADATA_HOST="127.0.0.1:9",
               AWS_EC2_METADATA_DISABLED="true", COLUMNS="120")
    return PageState(workdir=workdir, env=env, stack=ExitStack())


def _with_emulators(plan: BlockPlan, source: str, page: PageState) -> dict[str, str]:
    from tests import servers

    env = dict(page.env)
    for kind in plan.emulators:
        if kind not in page.endpoints:
            server = servers.gcs_emulator() if kind == "gcs-emulator" else servers.s3_server()
            page.endpoints[kind] = page.stack.enter_context(server)
        endpoint = page.endpoints[kind]
        buckets = sorted(set(_BUCKET[kind].findall(source)))
        if kind == "gcs-emulator":
            env["STORAGE_EMULATOR_HOST"] = endpoint
            for name in buckets:
                servers.create_gcs_bucket(endpoint, name=name, exist_ok=True)
        else:
            env.update(servers.S3_ENV, AWS_ENDPOINT_URL_S3=endpoint)
            for name in buckets:
                servers.create_s3_bucket(endpoint, name=name, exist_ok=True)
    return env


@contextmanager
def _in_page(page: PageState, env: dict[str, str]) -> Iterator[None]:
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    os.chdir(page.workdir)
    os.environ.clear()
    os.environ.update(env)
    try:
        from marin.storage import reset_storage_instances

        reset_storage_instances()
        yield
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)


def _python(plan: BlockPlan, source: str, example: Example, page: PageState) -> None:
    code = compile("\n" * (example.line) + source, example.path, "exec")
    if plan.file_name:
        (page.workdir / plan.file_name).write_text(source)
        return
    if plan.syntax_only:
        return
    env = _with_emulators(plan, source, page)
    with _in_page(page, env):
        exec(code, example.namespace)


def _transcript_commands(source: str) -> str:
    lines = source.splitlines()
    if not any(line.startswith("$ ") for line in lines):
        return source
    commands, continuing = [], False
    for line in lines:
        if line.startswith("$ ") or continuing:
            commands.append(line[2:] if line.startswith("$ ") else line)
            continuing = line.rstrip().endswith("\\")
    return "\n".join(commands) + "\n"


def _bash(plan: BlockPlan, source: str, example: Example, page: PageState) -> None:
    script = _transcript_commands(source)
    check = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
    assert check.returncode == 0, f"bash syntax error:\n{check.stderr}"
    if plan.syntax_only:
        return
    env = _with_emulators(plan, source, page)
    proc = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=page.workdir,
                          env=env, capture_output=True, text=True, timeout=BASH_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != plan.expected_exit:
        raise AssertionError(
            f"exit {proc.returncode} (expected {plan.expected_exit}) from:\n"
            f"{script}\n--- stdout ---\n{proc.stdout[-4000:]}\n"
            f"--- stderr ---\n{proc.stderr[-4000:]}")


def docs_sybil() -> Sybil:
    """The Sybil that collects README.md and docs/**/*.md. Each page gets a scratch folder
    under the session fixture ``docs_tmp_root`` (defined in the root conftest.py)."""

    def setup(namespace: dict) -> None:
        namespace["__name__"] = "docs_example"

    def teardown(namespace: dict) -> None:
        page = namespace.pop("__docs_page__", None)
        if page is not None:
            page.stack.close()

    return Sybil(parsers=[DocBlockParser()], path=str(ROOT), patterns=["*.md"], setup=setup,
                 teardown=teardown, fixtures=["docs_tmp_root"], name="docs")


def ledger_summary() -> list[str]:
    return [f"{file}:{line} [{language}] {how}" for file, line, language, how in LEDGER]
