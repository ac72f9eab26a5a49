"""``python -m marin.cli``: the ``marin`` command.

    python -m marin.cli executor --dry-run experiments/isoflop_3e19.py
"""

from marin.cli import run

run()
