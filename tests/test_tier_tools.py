"""The tiers' Debian tools (issue 79): a tier that uses a tool it does not install fails on every machine."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT
from tests.tier_tools import TOOLS, shadow_undeclared_tools, shadowed

TIERS = {"check": "CHECK_TOOLS", "test-slow": "SLOW_TOOLS", "test-browser": "BROWSER_TOOLS",
         "test-serve": "SERVE_TOOLS"}


def makefile_rules() -> dict[str, str]:
    """Each Makefile variable's value and each rule's prerequisites (`name: …`), as written."""
    text = (ROOT / "Makefile").read_text()
    return {name: value.strip() for name, value in re.findall(r"^([A-Za-z_-]+) *:=?(?!=)([^\n]*)", text, re.M)}


@pytest.mark.parametrize("tier", TIERS)
def test_each_tier_installs_the_tools_it_tells_its_tests(tier: str) -> None:
    rules = makefile_rules()
    variable = TIERS[tier]
    assert f"$({variable})" in rules[tier].split(), f"make {tier} does not install its tools ({variable})"
    assert set(rules[variable].split()) <= set(TOOLS), rules[variable]
    recipe = (ROOT / "Makefile").read_text().split(f"\n{tier}:", 1)[1].split("\n\n", 1)[0]
    assert f'MHA_TIER_TOOLS="$({variable})"' in recipe, f"make {tier}'s tests are not told its tools"


def test_an_undeclared_tool_is_a_stand_in_that_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    assert shadowed("chromium espeak redis") == {"haproxy": "haproxy"}
    assert set(shadowed("")) == {"chromium", "chromium-headless-shell", "espeak-ng", "haproxy", "redis-server"}
    with pytest.raises(ValueError, match="memcached"):
        shadowed("memcached")
    monkeypatch.setenv("MHA_TIER_TOOLS", "haproxy")
    monkeypatch.setenv("PATH", os.environ["PATH"])
    folder = shadow_undeclared_tools()
    assert shutil.which("espeak-ng") == str(folder / "espeak-ng")
    assert shutil.which("haproxy") != str(folder / "haproxy")
    run = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=False)
    assert run.returncode == 127
    assert "(espeak)" in run.stderr and "MHA_TIER_TOOLS='haproxy'" in run.stderr


def test_without_a_tier_nothing_is_shadowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MHA_TIER_TOOLS", raising=False)
    path = os.environ["PATH"]
    assert shadow_undeclared_tools() is None
    assert os.environ["PATH"] == path
