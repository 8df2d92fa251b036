"""The fuzz targets (tests/fuzz/) on their seed corpora and on every crash they found.

The long, coverage-guided runs are not part of the test run (docs/fuzzing.md); this keeps
the targets from rotting and replays each crash input that was fixed: every file must go
through its target's ``TestOneInput`` with nothing but the documented error raised inside.
Needs no atheris: the targets only import it when run by tests/fuzz/run.py.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parent.parent / "fuzz"
TARGETS = ("event", "batch", "ntriples", "rspql", "configdoc", "sim", "cloud", "mapping")
sys.path.insert(0, str(FUZZ))


def _inputs(folder: str) -> list:
    return [pytest.param(target, path, id=f"{target}/{path.name}")
            for target in TARGETS for path in sorted((FUZZ / folder / target).glob("*"))]


@pytest.fixture(autouse=True)
def _strict(monkeypatch):
    monkeypatch.delenv("EDGEWAVE_FUZZ_ALLOW_KNOWN", raising=False)  # known crashes are crashes here


def test_every_target_has_a_seed_corpus_and_is_runnable():
    import run

    assert sorted(run.TARGETS) == sorted(TARGETS)
    for target in TARGETS:
        assert len(list((FUZZ / "corpus" / target).glob("*"))) >= 3, target
        assert callable(importlib.import_module(f"fuzz_{target}").TestOneInput)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target, path", _inputs("corpus"))
def test_seed_input(target: str, path: Path) -> None:
    importlib.import_module(f"fuzz_{target}").TestOneInput(path.read_bytes())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target, path", _inputs("regressions"))
def test_fixed_crash_input(target: str, path: Path) -> None:
    importlib.import_module(f"fuzz_{target}").TestOneInput(path.read_bytes())


def test_a_target_lets_through_only_the_documented_error(monkeypatch):
    """The harness itself: an undocumented exception escapes TestOneInput (it is a crash)."""
    fuzz_rspql = importlib.import_module("fuzz_rspql")

    def broken(text, **options):
        raise IndexError("boom")

    monkeypatch.setattr(fuzz_rspql, "parse_query", broken)
    with pytest.raises(IndexError):
        fuzz_rspql.TestOneInput(b"SELECT * WHERE { ?s ?p ?o }")
