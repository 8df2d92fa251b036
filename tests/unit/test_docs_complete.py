"""Every command-line option and every configuration key is documented for users.

The options come from the programs' own argparse parsers (every console script of
pyproject.toml, every subcommand), caught as they are about to parse; the keys from the
shipped configs/*.yaml plus the settings classes the loaders fill. Each must appear in
README.md or docs/*.md as code (``--option``, ``key``, ``section.key``, or ``key:`` in a
YAML block); a subcommand as ``program subcommand`` in a code span or block, or as
``subcommand`` in the program's own document.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import re
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _code(text: str) -> str:
    """The code of a Markdown text: inline code spans and fenced blocks, joined."""
    blocks = re.findall(r"^ *```[^\n]*\n(.*?)^ *```", text, re.S | re.M)
    spans = re.findall(r"`([^`]+)`", re.sub(r"^ *```[^\n]*\n.*?^ *```", "", text, flags=re.S | re.M))
    return "\n".join(blocks + spans)


CODE = {path.name: _code(path.read_text(encoding="utf-8")) for path in DOCS}
ALL_CODE = "\n".join(CODE.values())


class _Caught(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def entry_parsers() -> dict[str, argparse.ArgumentParser]:
    """program name -> its top-level parser, from pyproject's [project.scripts]."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    parsers = {}
    original = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args

    def catch(self, *args, **kwargs):
        raise _Caught(self)
    argparse.ArgumentParser.parse_args = argparse.ArgumentParser.parse_known_args = catch  # type: ignore[assignment]
    try:
        for program, target in scripts.items():
            module, _, function = target.partition(":")
            entry = getattr(importlib.import_module(module), function)
            try:
                entry(["--help"]) if entry.__code__.co_argcount else entry()
            except _Caught as caught:
                parsers[program] = caught.parser
            else:
                raise AssertionError(f"{program}: {target} returned without parsing arguments")
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = original
    return parsers


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(subcommand path, long option or None) for every option and subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield path + (name,), None
                yield from walk(sub, path + (name,))
        elif action.help != argparse.SUPPRESS:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    yield path, option


PARSERS = entry_parsers()
OPTIONS = sorted({(program, path, option) for program, parser in PARSERS.items() for path, option in walk(parser)},
                 key=lambda item: (item[0], item[1], item[2] or ""))
PROGRAM_DOC = {"edgewave": "agent.md", "edgewave-agent": "agent.md", "edgewave-sim": "sim.md",
               "edgewave-cloud": "cloud.md"}


def test_every_console_script_has_a_parser_with_options() -> None:
    assert set(PARSERS) == {"edgewave", "edgewave-agent", "edgewave-sim", "edgewave-cloud"}
    assert sum(1 for _, _, option in OPTIONS if option) >= 60


@pytest.mark.parametrize("program,path,option", OPTIONS,
                         ids=[" ".join((p, *path, o or "")).strip() for p, path, o in OPTIONS])
def test_every_option_and_subcommand_is_documented(program: str, path: tuple[str, ...], option: str | None) -> None:
    if option is None:   # a subcommand: `program sub ...` anywhere, or `sub` in the program's document
        command = " ".join((program, *path))
        words = rf"(?<![\w-]){re.escape(path[-1])}(?![\w-])"
        assert (re.search(rf"(?<![\w-]){re.escape(command)}(?![\w-])", ALL_CODE)
                or re.search(words, CODE[PROGRAM_DOC[program]])), f"`{command}` is in no document"
    else:
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", ALL_CODE), (
            f"{program} {' '.join(path)} {option} is in no document (README.md, docs/*.md)")


# ---- configuration keys ----

def yaml_keys(data, prefix: str = "") -> set[str]:
    """Dotted key paths of a YAML document; list items of mappings contribute their keys."""
    keys: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}{key}"
            keys.add(path)
            keys |= yaml_keys(value, path + ".")
    elif isinstance(data, list):
        for item in data:
            keys |= yaml_keys(item, prefix)
    return keys


def dataclass_keys(cls: type, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for field in dataclasses.fields(cls):
        if field.name == "source" or not field.init:
            continue
        path = f"{prefix}{field.name}"
        keys.add(path)
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        if dataclasses.is_dataclass(default):
            keys |= dataclass_keys(type(default), path + ".")
    return keys


def _shipped(name: str) -> dict:
    return yaml.safe_load((REPO / "configs" / name).read_text(encoding="utf-8")) or {}


def agent_keys() -> set[str]:
    from edgewave.agent.config import AgentSettings
    keys = yaml_keys(_shipped("agent.yaml")) | dataclass_keys(AgentSettings)
    return {k for k in keys if not k.startswith("input.streams.")}   # a map of the user's own stream names


def cloud_keys() -> set[str]:
    from edgewave.cloud.settings import CloudSettings
    keys = yaml_keys(_shipped("cloud.yaml")) | dataclass_keys(CloudSettings)
    # maps keyed by the user's own names: gateways.<id>.*, dashboard.users.<name>.*
    gateway_fields = {k.split(".", 2)[2] for k in keys if k.startswith("gateways.") and k.count(".") >= 2}
    user_fields = {k.split(".", 3)[3] for k in keys if k.startswith("dashboard.users.") and k.count(".") >= 3}
    keys = {k for k in keys if not re.match(r"gateways\.[^.]+|dashboard\.users\.[^.]+", k)}
    from edgewave.cloud.settings import GatewaySettings
    return keys | {f"gateways.<id>.{f}" for f in gateway_fields | {f.name for f in dataclasses.fields(GatewaySettings)}} \
        | {f"dashboard.users.<name>.{f}" for f in user_fields | {"role", "password_hash"}}


def sim_keys() -> set[str]:
    from edgewave.firmware_sim import config
    keys = yaml_keys(_shipped("sim.yaml"))
    broker = getattr(config, "SensorBrokerSettings", None) or config.BrokerSettings
    keys |= {f"broker.{k}" for k in dataclass_keys(broker)} | {f"site.{k}" for k in config.DEFAULT_SITE}
    keys |= {f"site.patients.{k}" for p in config.DEFAULT_SITE["patients"] for k in p}
    keys |= {f"site.people.{k}" for p in config.DEFAULT_SITE["people"] for k in p}
    keys = {k for k in keys if not k.startswith("sensors.") or k.endswith(".period_s")}
    return {re.sub(r"^sensors\.[^.]+\.", "sensors.<kind>.", k) for k in keys}


def documented(key: str, code: str) -> bool:
    """``key`` as code: its dotted path, or its last part (with its section, or as a YAML key)."""
    parts = key.replace("<id>.", "").replace("<name>.", "").replace("<kind>.", "").split(".")
    leaf = re.escape(parts[-1])
    candidates = [rf"(?<![\w.-]){re.escape(key)}(?![\w-])"]
    candidates += [rf"(?<![\w.-]){re.escape('.'.join(parts[i:]))}(?![\w-])" for i in range(len(parts) - 1)]
    candidates += [rf"^\s*(- )?{leaf}:", rf"(?<![\w.-]){leaf}(?![\w-])"]
    return any(re.search(pattern, code, re.M) for pattern in candidates)


KEYS = ([("agent", k) for k in sorted(agent_keys())] + [("cloud", k) for k in sorted(cloud_keys())]
        + [("sim", k) for k in sorted(sim_keys())])


def test_the_key_sets_are_read() -> None:
    found = {part: {k for p, k in KEYS if p == part} for part in ("agent", "cloud", "sim")}
    assert {"local.tls.ca", "input.queue_max", "outbox.max_bytes"} <= found["agent"], found["agent"]
    assert {"broker.host", "spark.trigger_s", "dashboard.users.<name>.role"} <= found["cloud"] or len(found["cloud"]) > 40
    assert {"site.rooms", "broker.qos", "sensors.<kind>.period_s"} <= found["sim"]


@pytest.mark.parametrize("part,key", KEYS, ids=[f"{p}:{k}" for p, k in KEYS])
def test_every_config_key_is_documented(part: str, key: str) -> None:
    code = CODE[f"{part}.md"] + "\n" + CODE["operations.md"] + "\n" + CODE["README.md"]
    assert documented(key, code), f"{key} of {part}'s configuration is not in docs/{part}.md"
