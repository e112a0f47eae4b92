"""Where the data sets read from folders (Fashion-MNIST, CIFAR-10) are looked for, as each
command's one-line refusal says: every option it names is one of that command's options, every
environment variable it names is one the loader reads (set to a folder with the files, the
lookup finds them there), and --data-dir, where a command has it, is honoured."""

from __future__ import annotations

import argparse
import re

import pytest

from learning import data
from sims.cli import main
from sims.cli.common import Parser

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
VARIABLE = re.compile(r"\bFEDMARKET_[A-Z0-9_]+\b")
FILES = {"FEDMARKET_FASHION_MNIST": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                     "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
         "FEDMARKET_CIFAR10": (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch")}
FINDER = {"FEDMARKET_FASHION_MNIST": data.fashion_mnist_folder,
          "FEDMARKET_CIFAR10": data.cifar10_folder}


def options(command: str) -> set[str]:
    """The option strings of ``fedmarket COMMAND``, from the CLI's own parser."""
    from importlib import import_module

    sub = Parser(prog="fedmarket").add_subparsers(dest="command")
    import_module(f"sims.cli.{command}").add_parser(sub, full=True)
    return {s for a in sub.choices[command]._actions for s in a.option_strings}


def unknown_names(message: str, command: str, tmp_path, monkeypatch) -> list[str]:
    """The flags and variables in ``message`` that ``command`` does not have or the loader
    does not honour (an empty list for an honest message)."""
    bad = sorted(set(FLAG.findall(message)) - options(command))
    for name in sorted(set(VARIABLE.findall(message))):
        if name not in FILES:
            bad.append(name)
            continue
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        for f in FILES[name]:
            (folder / f).write_bytes(b"")
        monkeypatch.setenv(name, str(folder))
        if FINDER[name]() != folder:
            bad.append(name)
        monkeypatch.delenv(name)
    return bad


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """Neither data set anywhere the loaders look."""
    monkeypatch.setattr(data, "CIFAR10_DIRS", ())
    monkeypatch.setattr(data, "FASHION_MNIST_DIRS", ())
    monkeypatch.delenv("FEDMARKET_CIFAR10", raising=False)
    monkeypatch.delenv("FEDMARKET_FASHION_MNIST", raising=False)
    return tmp_path


def refusal(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("fedmarket: error: "), err
    return err


@pytest.mark.parametrize("dataset", ["fashion-mnist", "cifar10"])
@pytest.mark.parametrize("given", [False, True])
def test_train_names_only_its_options_and_honoured_variables(
        no_data, monkeypatch, capsys, dataset, given):
    out = str(no_data / "o")
    argv = ["train", "--dataset", dataset, "--out", out, "--quiet", "--rounds", "1"]
    if given:
        argv += ["--data-dir", str(no_data / "empty")]
    err = refusal(argv, capsys)
    assert err.startswith(f"fedmarket: error: {'--data-dir' if given else '--dataset'}: ")
    names = set(FLAG.findall(err)) | set(VARIABLE.findall(err))
    # given, the folder is the only place looked in: no variable can help
    assert names == ({"--data-dir"} if given else
                     {"--dataset", "--data-dir", {"fashion-mnist": "FEDMARKET_FASHION_MNIST",
                                                  "cifar10": "FEDMARKET_CIFAR10"}[dataset]})
    assert unknown_names(err, "train", no_data, monkeypatch) == []
    assert not (no_data / "o").exists()  # refused before any output


@pytest.mark.parametrize("setting, scenarios, variable", [
    ("full", ["fig4"], "FEDMARKET_CIFAR10"),
    ("reduced", ["fig2"], "FEDMARKET_FASHION_MNIST")])
def test_reproduce_names_only_its_options_and_honoured_variables(
        no_data, monkeypatch, capsys, setting, scenarios, variable):
    argv = ["reproduce", "--setting", setting, "--seeds", "0", "--scenarios", *scenarios,
            "--out", str(no_data / "r"), "--quiet"]
    err = refusal(argv, capsys)
    assert VARIABLE.findall(err) == [variable] and "--data-dir" not in options("reproduce")
    assert set(FLAG.findall(err)) == {"--setting"}
    assert unknown_names(err, "reproduce", no_data, monkeypatch) == []
    # the message as it was (d23ecd6) named a --data-dir that reproduce does not have
    old = ("CIFAR-10 python batches not found. Download cifar-10-python.tar.gz, unpack it and "
           "pass the cifar-10-batches-py folder (or its parent) as data_dir / --data-dir, or "
           "set FEDMARKET_CIFAR10.")
    assert unknown_names(old, "reproduce", no_data, monkeypatch) == ["--data-dir"]
    assert unknown_names("set FEDMARKET_CIFAR_10.", "reproduce", no_data, monkeypatch) \
        == ["FEDMARKET_CIFAR_10"]


def test_train_data_dir_is_honoured(no_data, cifar_batches):
    """--data-dir names the folder train reads: a small CIFAR-10 there trains (2 clients,
    1 round of 1 step) and its provenance records the folder."""
    import json

    cifar_batches(no_data / "cifar", n_train=20)
    out = no_data / "o"
    assert main(["train", "--dataset", "cifar10", "--data-dir", str(no_data / "cifar"),
                 "--algorithm", "local", "--clients", "2", "--rounds", "1", "--steps", "1",
                 "--batch", "4", "--partition", "iid", "--out", str(out), "--quiet"]) == 0
    meta = json.loads((out / "local.json").read_text())
    assert meta["config"]["data_dir"] == str(no_data / "cifar")
    assert meta["config"]["dataset"] == "cifar10"


def test_argparse_private_names_still_there():
    """options() reads argparse's actions; if argparse renames them the checks above would
    pass vacuously, so this fails instead."""
    assert "--setting" in options("reproduce") and "--data-dir" in options("train")
    assert isinstance(Parser(prog="x"), argparse.ArgumentParser)
