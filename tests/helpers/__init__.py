"""Helpers shared by several test modules, so that no test module imports another.

    from tests.helpers.steps import CALLS, step        # steps that record their runs
    from tests.helpers.corpus import plays             # real text for tokenizers and trainers
    from tests.helpers.training import tiny_config     # a trainer config small enough for CI
    from tests.helpers.caches import read_split        # a token cache's split, read directly
    from tests.helpers.studies import TINY, BUDGETS    # the tiny IsoFLOP study setup
    from tests.helpers.synthetic_runs import isoflop_runs   # runs drawn from known laws
    from tests.helpers.run_folders import WRITERS      # run folders in each layout a fit reads
    from tests.helpers.export import marin_cli         # the export tests' run and command line
    from tests.helpers.distributions import make_distribution  # an installed plugin package
    from tests.helpers.processes import marin_command  # `marin` as a foreground job, to signal

Fixtures shared the same way live in ``tests/conftest.py``: the storage emulators, and the
session's read-only token caches (``cache``, ``docs_cache``) and trained export run
(``trained``), each built once per test session.
"""
