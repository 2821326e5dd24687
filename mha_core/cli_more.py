"""Subcommands beyond `attention`: filled in as the modules they drive arrive."""

from __future__ import annotations

PARSERS: list = []
