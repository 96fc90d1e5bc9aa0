"""The error lines the docs show for a method typo are the lines the code prints: their list of
methods is the registry's, so a new method cannot leave the docs behind."""

from __future__ import annotations

import copy
import re

import pytest

from ptsl import make_config
from ptsl.core.errors import ConfigError
from ptsl.core.methods import METHODS
from ptsl.ops.params import parse_params

from ..conftest import ROOT
from .report_data import RAW

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
METHOD_ERROR = re.compile(r"(\S*method): unknown value '(\w+)'; allowed: ([\w, ]+)$")


def _shown() -> list[tuple[str, str]]:
    """(doc, line) of every method error line the docs show."""
    return [(doc.name, m.group(0)) for doc in DOCS for line in doc.read_text().splitlines()
            if (m := METHOD_ERROR.search(line.strip()))]


def _printed(key: str, value: str) -> str:
    """What the code says for ``value`` at ``key``: the params file's parser, or the API's."""
    with pytest.raises(ConfigError) as err:
        if key == "method":
            make_config(value, "reach-v3")
        else:
            raw = copy.deepcopy(RAW)
            _, name, _ = key.split(".")
            raw["experiments"][name]["method"] = value
            parse_params(raw)
    return str(err.value)


def test_the_docs_method_errors_list_the_registry():
    shown = _shown()
    assert {doc for doc, _ in shown} >= {"configuration.md", "api.md"}
    for doc, line in shown:
        key, value, allowed = METHOD_ERROR.search(line).groups()
        assert allowed.split(", ") == list(METHODS), f"{doc}: {line}"
        assert _printed(key, value) == line, doc
