"""The Java version check before the Spark job starts (cloud/spark_runtime.py, ``check_java``)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from edgewave.cloud.spark_runtime import JavaMissing, check_java, java_major_version


def fake_jdk(root: Path, release: str | None, version_output: str) -> Path:
    """A JDK directory whose bin/java prints ``version_output`` on stderr and records that it ran."""
    (root / "bin").mkdir(parents=True)
    java = root / "bin" / "java"
    java.write_text(f"#!/bin/sh\ntouch '{root / 'ran'}'\necho '{version_output}' >&2\n")
    java.chmod(0o755)
    if release is not None:
        (root / "release").write_text(release)
    return java


def test_the_release_file_gives_the_version_without_starting_java(tmp_path):
    java = fake_jdk(tmp_path / "jdk", 'IMPLEMENTOR="Debian"\nJAVA_VERSION="17.0.15"\n', 'openjdk version "11.0.2"')
    assert java_major_version(str(java)) == 17
    assert not (tmp_path / "jdk" / "ran").exists()


def test_a_java_8_release_file_reads_as_8(tmp_path):
    java = fake_jdk(tmp_path / "jdk", 'JAVA_VERSION="1.8.0_392"\n', "")
    assert java_major_version(str(java)) == 8


def test_without_a_release_file_java_is_asked(tmp_path):
    java = fake_jdk(tmp_path / "jdk", None, 'openjdk version "1.8.0_292"')
    assert java_major_version(str(java)) == 8
    assert (tmp_path / "jdk" / "ran").exists()


def test_a_link_to_java_finds_its_jdk(tmp_path):
    """/usr/bin/java is a chain of links on Debian: the release file is beside the real binary."""
    java = fake_jdk(tmp_path / "jdk", 'JAVA_VERSION="21.0.1"\n', "")
    (tmp_path / "bin").mkdir()
    os.symlink(java, tmp_path / "bin" / "java")
    assert java_major_version(str(tmp_path / "bin" / "java")) == 21


def test_java_too_old_is_refused_with_what_to_do(tmp_path, monkeypatch):
    fake_jdk(tmp_path / "jdk", 'JAVA_VERSION="11.0.20"\n', "")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(JavaMissing, match="is Java 11.*Java 17 or newer"):
        check_java()


def test_unreadable_version_is_refused(tmp_path, monkeypatch):
    fake_jdk(tmp_path / "jdk", "garbage\n", "no version here")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(JavaMissing, match="could not read the version"):
        check_java()
