"""The executor's options: one definition, both spellings in both front ends."""

import dataclasses
from pathlib import Path

import pytest

from marin import cli
from marin.execution.frontend.options import (
    ExecutorMainConfig,
    OptionsError,
    normalize,
    options_from,
    parse_options,
)
from marin.execution.runners import make_runner

HELLO = str(Path(__file__).parent.parent / "experiments" / "hello_pipeline.py")

# One non-default value per field, as typed on a command line; a new field must be added here.
GIVEN = {
    "prefix": (["/tmp/p"], "/tmp/p"), "dry_run": (["true"], True),
    "run_only": (["a.*"], ["a.*"]), "force_run_failed": (["false"], False),
    "force_run": (["b.*"], ["b.*"]), "max_concurrent": (["3"], 3),
    "backend": (["ray"], "ray"), "json": (["yes"], True), "lease_ttl": (["7.5"], 7.5),
    "show_skipped": (["false"], False), "all": (["1"], True), "pack": (["4"], 4),
}


def _cli_options(args: list[str]) -> ExecutorMainConfig:
    """What ``marin executor ARGS EXPERIMENT`` parses, without running anything."""
    argv = ["executor", *normalize([*args, HELLO], positionals=True)]
    namespace, extra = cli._parser().parse_known_args(argv)
    assert namespace.experiment == HELLO
    options, rest = options_from(namespace, extra)
    assert rest == []
    return options


def test_every_field_is_an_option_of_both_front_ends_under_both_spellings():
    fields = {f.name for f in dataclasses.fields(ExecutorMainConfig)} - {"runner_options"}
    assert fields == set(GIVEN)
    for name, (values, expected) in GIVEN.items():
        for flag in {f"--{name}", f"--{name.replace('_', '-')}"}:
            for parse in (parse_options, _cli_options):
                options = parse([flag, *values])
                assert getattr(options, name) == expected, (parse.__name__, flag)
                others = {f.name for f in dataclasses.fields(options)} - {name}
                default = ExecutorMainConfig()
                assert all(getattr(options, o) == getattr(default, o) for o in others)


def test_a_bare_boolean_flag_means_true_and_the_old_negation_still_works():
    assert parse_options(["--dry-run"]).dry_run is True
    assert _cli_options(["--dry_run"]).dry_run is True  # the experiment is not its value
    for parse in (parse_options, _cli_options):
        assert parse(["--no-retry-failed"]).force_run_failed is False
        assert parse(["--no_retry_failed"]).force_run_failed is False


def test_list_options_take_draccus_lists_repeats_and_runs_of_values():
    assert parse_options(["--run_only", "a", "b", "--dry_run"]).run_only == ["a", "b"]
    assert parse_options(["--run_only", "[a, b]"]).run_only == ["a", "b"]
    assert _cli_options(["--run-only", "a", "--run_only", "b"]).run_only == ["a", "b"]


@pytest.mark.parametrize("args, words", [
    (["--dry_run", "maybe"], ["--dry_run", "expected true or false", "maybe"]),
    (["--max-concurrent", "many"], ["--max-concurrent", "many"]),
    (["--bogus", "1"], ["unrecognized", "--bogus"]),
    (["--runner-option", "address"], ["--runner-option", "KEY=VALUE"]),
])
def test_bad_options_are_one_line_errors_naming_the_option(args, words):
    with pytest.raises(OptionsError) as caught:
        parse_options(args)
    message = str(caught.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_runner_options_reach_the_runner_opaquely():
    for args in (["--backend", "ray", "--runner-option", "address=10.0.0.2:6379"],
                 ["--backend", "ray", "--ray-address", "10.0.0.2:6379"],
                 ["--backend=ray", "--ray_address=10.0.0.2:6379"]):
        for parse in (parse_options, _cli_options):
            assert parse(args).runner_options == {"address": "10.0.0.2:6379"}, args
    # With the local backend, --ray-address is no option at all.
    with pytest.raises(OptionsError, match="unrecognized arguments: --ray-address"):
        parse_options(["--ray-address", "x:1"])


def test_a_runner_refuses_an_option_it_does_not_declare():
    with pytest.raises(ValueError, match="'local' runner has no option 'address'; it accepts: "
                       "none"):
        make_runner("local", 1, address="x:1")
    assert make_runner("local", 2).max_concurrent == 2


def test_show_skipped_reaches_the_dry_run_table(tmp_path: Path, capsys):
    prefix = str(tmp_path)
    assert cli.main(["executor", "--prefix", prefix, HELLO]) == 0
    capsys.readouterr()
    assert cli.main(["executor", "--dry-run", "--prefix", prefix, HELLO]) == 0
    shown = capsys.readouterr().out
    assert cli.main(["executor", "--dry-run", "--show-skipped", "false", "--prefix", prefix,
                     HELLO]) == 0
    hidden = capsys.readouterr().out
    assert "corpus/pydoc_topics" in shown and "already succeeded" in shown
    assert "corpus/pydoc_topics" not in hidden and "skipped" in hidden
