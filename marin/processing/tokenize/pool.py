"""Worker processes for the tokenize step, started the cheapest way that is safe.

    for job, result in run_shards(jobs, processes=2):   # in completion order
        ledger.record_shard(job.split, shard_name(job.index), result)

Two routes, chosen per call:

* ``fork``: this process has a single thread and has not imported JAX (a script calling
  ``tokenize``). Workers are forked and inherit the tokenizer already loaded.
* ``subprocess``: anything else, notably a step inside the executor, whose runner threads
  and lease heartbeats make forking unsafe (a child can inherit a lock held by another
  thread). The step starts one process of its own, ``python -m
  marin.processing.tokenize.pool``, a fresh interpreter that imports only the tokenizer
  code (never the caller's main module, never JAX), loads the tokenizer once, and forks the
  workers from its single thread. Jobs go in on stdin; one JSON line per finished shard
  comes back on stdout; a worker's exception comes back pickled and is raised here as it
  would be from an in-process pool.

Design note: the executor used to get ``spawn``ed workers, each a fresh interpreter that
imports the caller's main module (an experiment script that may import JAX) and loads the
tokenizer itself (about a second for GPT-2): on 2 cores that made the step slower than
tiktoken's own batch encoder. A forkserver avoids the main module but still loads the
tokenizer in every worker; a pool created before the executor starts its threads would
need the executor to know about tokenization. The owned subprocess pays one interpreter
start and one tokenizer load, whatever the number of workers; ``bench/bench_tokenize.py``
measures every route in one run.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.shard import ShardJob, tokenize_shard


def choose_route() -> str:
    """``fork`` when this process has one thread and no JAX; ``subprocess`` otherwise."""
    safe = threading.active_count() == 1 and "jax" not in sys.modules
    return "fork" if safe and "fork" in multiprocessing.get_all_start_methods() else \
        "subprocess"


def run_shards(jobs: list[ShardJob], processes: int, route: str | None = None
               ) -> Iterator[tuple[ShardJob, dict[str, Any]]]:
    """Tokenize ``jobs`` on ``processes`` workers; yields (job, result) as shards finish.
    ``route`` (default: ``choose_route()``) may also name a start method (``spawn``,
    ``forkserver``) for comparison."""
    route = route or choose_route()
    if route == "subprocess":
        yield from _in_subprocess(jobs, processes)
    else:
        yield from _in_pool(jobs, processes, route)


def _in_pool(jobs: list[ShardJob], processes: int, method: str
             ) -> Iterator[tuple[ShardJob, dict[str, Any]]]:
    context = multiprocessing.get_context(method)
    if method == "forkserver":  # the shard code only, not the caller's main module
        context.set_forkserver_preload(["marin.processing.tokenize.shard"])
    if method == "fork":
        load_encoder(jobs[0].tokenizer)  # loaded once, inherited by every worker
    with ProcessPoolExecutor(min(processes, len(jobs)), mp_context=context) as pool:
        pending: dict[Future, ShardJob] = {pool.submit(tokenize_shard, j): j for j in jobs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield pending.pop(future), future.result()


def _in_subprocess(jobs: list[ShardJob], processes: int
                   ) -> Iterator[tuple[ShardJob, dict[str, Any]]]:
    package_root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "marin.processing.tokenize.pool",
                             str(processes)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, text=True, start_new_session=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps([dataclasses.asdict(j) for j in jobs]))
        proc.stdin.close()
        finished = 0
        for line in proc.stdout:
            message = json.loads(line)
            if "error" in message:
                raise pickle.loads(base64.b64decode(message["error"]))
            finished += 1
            yield jobs[message["index"]], message["result"]
        code = proc.wait()
        if finished < len(jobs):
            raise RuntimeError(f"the tokenize worker process exited with code {code} after "
                               f"{finished} of {len(jobs)} shards; its error is above")
    finally:
        if proc.poll() is None:  # an error or an interrupt here: stop its workers too
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def _serve(processes: int) -> None:
    """The owned subprocess: read jobs from stdin, fork workers, report each shard."""
    jobs = [ShardJob(**j) for j in json.load(sys.stdin)]
    position = {(job.split, job.index): i for i, job in enumerate(jobs)}
    parent = os.getppid()
    pool = _in_pool(jobs, processes, "fork")
    try:
        for job, result in pool:
            print(json.dumps({"index": position[job.split, job.index], "result": result}),
                  flush=True)
            if os.getppid() != parent:  # the step is gone: so are this group's workers
                os.killpg(0, signal.SIGKILL)
    except Exception as e:
        try:
            payload = pickle.dumps(e)
        except Exception:
            payload = pickle.dumps(RuntimeError(f"{type(e).__name__}: {e}"))
        print(json.dumps({"error": base64.b64encode(payload).decode()}), flush=True)
    finally:
        pool.close()


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
