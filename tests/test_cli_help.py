"""The command line reads well: every option of every command has a help line that states
its default, choice lists come from the registries, and importing the sweep machinery does
not load torch."""

import subprocess
import sys

import pytest

from sims.cli import COMMANDS, build_parser


def _subparser(command):
    parser = build_parser([command])
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_has_help_and_default(command):
    sub = _subparser(command)
    text = sub.format_help()
    options = [a for a in sub._actions if a.option_strings and a.dest != "help"]
    assert options or command == "report"
    for a in options:
        assert a.help, f"{command} {a.option_strings} has no help line"
        if a.default is not None and not isinstance(a.default, bool):
            assert "(default:" in sub._get_formatter()._get_help_string(a), a.option_strings
    assert "usage: fedmarket " + command in text


def test_train_lists_every_config_field_with_its_default():
    from dataclasses import fields

    from learning.algorithms import ALGORITHMS, TrainConfig

    sub = _subparser("train")
    dests = {a.dest: a for a in sub._actions}
    for f in fields(TrainConfig):
        if f.name == "algorithm":  # built-in names or one of your own: no fixed choices
            assert dests[f.name].choices is None
            assert all(name in dests[f.name].help for name in ALGORITHMS)
            assert "module:" in dests[f.name].help
            continue
        assert f.name in dests, f"train has no option for TrainConfig.{f.name}"
        assert dests[f.name].default == f.default


def test_sweep_choices_come_from_the_registries():
    from sims.sweep import EXECUTORS, PRESETS

    dests = {a.dest: a for a in _subparser("sweep")._actions}
    assert tuple(dests["executor"].choices) == EXECUTORS
    assert set(dests["preset"].choices) == set(PRESETS)


def test_import_sweep_and_cli_loads_no_torch():
    code = ("import sys, sims.sweep, sims.cli; sims.cli.build_parser(['sweep']); "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True)
    assert r.stdout.strip() == "False"
