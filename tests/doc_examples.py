"""Every fenced ``python`` and ``bash`` block in README.md and docs/ runs as a test.

    python3 dev.py test README.md docs/                 # only the documentation
    python3 dev.py test docs/executor.md -k "line:40"   # one block

Collection is Sybil's (the root ``conftest.py`` hands it ``pytest_collect_file``); this
module decides how each block is run. Blocks of one page share state the way a reader's
session does: Python blocks run one after another in one interpreter of their own (a
subprocess per page, so that a page's imports, environment and JAX state never leak into
the test process or another page), and every block of a page runs in the same scratch
folder, where ``experiments/`` and ``plugins/`` link to the repository so
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
``<!-- docs: checked-by PATH -->``
    the block changes the environment it runs in (``pip install``, the set-up commands),
    or reads what such a block made (the main job's outputs): checked for syntax here, and
    PATH (a test file, or ``.ci/run``) runs the same thing in a place of its own
    (``checked_block`` finds it). PATH must exist.
``<!-- docs: output checked-by PATH -->`` before a ``text`` block
    sample output that the test file PATH compares with a real run's (``sample_output``
    finds it); ``text`` blocks are not run.

Variables that a bash block exports stay set for the later blocks of its page. Bash blocks
whose lines start with ``$ `` are transcripts: only those lines run and the
rest is the output shown to the reader. Other languages (``toml``, plain fences) are text.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
        elif word == "checked-by" and rest and (ROOT / rest).exists():
            plan.syntax_only = f"checked by {rest}"
        else:
            raise DocsDirectiveError(
                f"{where}: unknown docs directive {part!r}; use excerpt, needs "
                f"{'|'.join(sorted(SYNTAX_ONLY_NEEDS))}, gcs-emulator, s3-emulator, "
                "file NAME (python), exit N or checked-by PATH (an existing file)")
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
    if Path(example.path).resolve().is_relative_to(ROOT):
        LEDGER.append((os.path.relpath(example.path, ROOT), example.line, plan.language,
                       plan.how))
    if plan.language == "python":
        _python(plan, source, example, page)
    else:
        _bash(plan, source, example, page)


_KERNEL = r"""
import json, os, sys, traceback
replies = os.fdopen(int(sys.argv[1]), "w")
namespace = {"__name__": "docs_example"}
for request in sys.stdin:
    request = json.loads(request)
    os.environ.clear()
    os.environ.update(request["env"])
    if "marin.storage" in sys.modules:
        sys.modules["marin.storage"].reset_storage_instances()
    try:
        exec(compile(request["source"], request["path"], "exec"), namespace)
        reply = {"ok": True}
    except BaseException:
        reply = {"ok": False, "error": traceback.format_exc()}
    sys.stdout.flush(); sys.stderr.flush()
    replies.write(json.dumps(reply) + "\n"); replies.flush()
"""


class _Kernel:
    """One Python interpreter that runs a page's blocks in order, in one namespace."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        read_fd, write_fd = os.pipe()
        self._log = open(workdir / ".python-blocks.log", "w")  # noqa: SIM115
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _KERNEL, str(write_fd)], cwd=workdir, env=env,
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT, text=True,
            pass_fds=(write_fd,))
        os.close(write_fd)
        self._replies = os.fdopen(read_fd)
        self.log_path = workdir / ".python-blocks.log"

    def run(self, source: str, path: str, env: dict[str, str]) -> dict:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"source": source, "path": path, "env": env}) + "\n")
        self._proc.stdin.flush()
        reply = self._replies.readline()
        if not reply:
            raise AssertionError(f"the page's Python process died (exit {self._proc.wait()}); "
                                 f"its output:\n{self.log_path.read_text()[-4000:]}")
        return json.loads(reply)

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._replies.close()
        self._log.close()


@dataclass
class PageState:
    """What the blocks of one page share: a scratch folder, the environment, an
    interpreter for its Python blocks, and the emulators they asked for."""

    workdir: Path
    env: dict[str, str]
    stack: ExitStack
    endpoints: dict[str, str] = field(default_factory=dict)
    kernel: _Kernel | None = None

    def python(self, source: str, path: str, env: dict[str, str]) -> dict:
        if self.kernel is None:
            self.kernel = _Kernel(self.workdir, env)
            self.stack.callback(self.kernel.close)
        return self.kernel.run(source, path, env)


def _page_state(example: Example) -> PageState:
    namespace = example.namespace
    if "__docs_page__" not in namespace:
        page = Path(example.path).resolve()
        page = page.relative_to(ROOT) if page.is_relative_to(ROOT) else Path(page.name)
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


def _python(plan: BlockPlan, source: str, example: Example, page: PageState) -> None:
    padded = "\n" * example.line + source  # tracebacks then give the page's line numbers
    compile(padded, example.path, "exec")
    if plan.file_name:
        (page.workdir / plan.file_name).write_text(source)
        return
    if plan.syntax_only:
        return
    reply = page.python(padded, example.path, _with_emulators(plan, source, page))
    if not reply["ok"]:
        raise AssertionError(f"the block raised:\n{reply['error']}")


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


_SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_", "BASH_EXECUTION_STRING"}
_EMULATOR_VARS = {"STORAGE_EMULATOR_HOST", "AWS_ENDPOINT_URL_S3"}


def _bash(plan: BlockPlan, source: str, example: Example, page: PageState) -> None:
    script = _transcript_commands(source)
    check = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
    assert check.returncode == 0, f"bash syntax error:\n{check.stderr}"
    if plan.syntax_only:
        return
    env = _with_emulators(plan, source, page)
    env_out = page.workdir / ".docs-env"
    # Variables a block exports stay set for the page's later blocks, as in a terminal.
    wrapped = f"trap 'env -0 > {str(env_out)!r}' EXIT\n{script}"
    # What a block leaves running in the background (a server a later block uses) is
    # stopped when the page ends, even if the page's own last command never ran.
    proc = _run_bash(wrapped, script, page.workdir, env,
                     started=lambda pid: page.stack.callback(_stop_group, pid))
    if proc.returncode != plan.expected_exit:
        raise AssertionError(
            f"exit {proc.returncode} (expected {plan.expected_exit}) from:\n"
            f"{script}\n--- stdout ---\n{proc.stdout[-4000:]}\n"
            f"--- stderr ---\n{proc.stderr[-4000:]}")
    if env_out.exists():
        exported = dict(item.split("=", 1) for item in
                        env_out.read_text().split("\0") if "=" in item)
        # The harness's emulator addresses hold for this block only; one the page exports
        # itself (its own emulator) stays, as any other variable does.
        injected = {k: v for k, v in env.items() if k in _EMULATOR_VARS and
                    page.env.get(k) != v}
        kept = {k: v for k, v in exported.items() if k not in _SHELL_OWN
                and (k not in injected or injected[k] != v)}
        page.env = {**kept, **{k: page.env[k] for k in injected if k in page.env and
                               exported.get(k) == injected[k]}}


def _run_bash(wrapped: str, script: str, cwd: Path, env: dict[str, str],
              started: Callable[[int], Any] = lambda pid: None
              ) -> subprocess.CompletedProcess:
    """Run ``wrapped`` (``script`` with the harness's additions) in a process group of its
    own, so that a block that times out takes what it started in the background with it;
    ``started`` gets the group's id."""
    proc = subprocess.Popen(["bash", "-eo", "pipefail", "-c", wrapped], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    started(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=BASH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"timed out after {BASH_TIMEOUT_S} s (a command that serves "
                             f"forever? start it in the background and stop it):\n{script}"
                             ) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _stop_group(pgid: int) -> None:
    """SIGTERM to what is left of a block's process group (nothing, usually)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


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


def documented_file(page: Path, name: str) -> str:
    """The source of the block that ``page`` marks ``<!-- docs: file NAME -->``."""
    for example in docs_sybil().parse(page).examples():
        plan, source = example.parsed
        if plan.file_name == name:
            return source
    raise LookupError(f"{page}: no block marked <!-- docs: file {name} -->")


def checked_block(page: Path, checker: str) -> str:
    """The source of the block that ``page`` marks ``<!-- docs: checked-by CHECKER -->``
    (one per checker and page), for the checker to run where it should."""
    found = [source for plan, source in (e.parsed for e in docs_sybil().parse(page).examples())
             if plan.syntax_only == f"checked by {checker}"]
    if len(found) != 1:
        raise LookupError(f"{page}: {len(found)} blocks marked <!-- docs: checked-by "
                          f"{checker} -->; expected one")
    return found[0]


_SAMPLE = re.compile(r"<!--\s*docs:\s*output checked-by (?P<checker>\S+)\s*-->\s*\n"
                     r"```text\n(?P<body>.*?)^```", re.DOTALL | re.MULTILINE)


def sample_output(page: Path, checker: str) -> list[str]:
    """The lines of the ``text`` block that ``page`` marks ``<!-- docs: output checked-by
    CHECKER -->``: sample output that CHECKER compares with a real run's."""
    found = [m["body"] for m in _SAMPLE.finditer(page.read_text()) if m["checker"] == checker]
    if len(found) != 1:
        raise LookupError(f"{page}: {len(found)} text blocks marked <!-- docs: output "
                          f"checked-by {checker} -->; expected one")
    return found[0].splitlines()


def ledger_summary() -> list[str]:
    return [f"{file}:{line} [{language}] {how}" for file, line, language, how in LEDGER]
