"""Helpers shared by several test modules, so that no test module imports another.

    from tests.helpers.steps import CALLS, step        # steps that record their runs
    from tests.helpers.corpus import plays             # real text for tokenizers and trainers
    from tests.helpers.training import tiny_config     # a trainer config small enough for CI
    from tests.helpers.distributions import make_distribution  # an installed plugin package
    from tests.helpers.processes import marin_command  # `marin` as a foreground job, to signal

Fixtures shared the same way (the token ``cache``, storage emulators) live in
``tests/conftest.py``.
"""
