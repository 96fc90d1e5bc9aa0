"""The budget switch: ``python -m ptsl.ops.budget paper`` (or ``small``) writes a preset from
the ``budgets:`` section into the active keys of params.yaml, keeping its comments.

Stages read the active keys (``train.*``, ``sac.batch_size``, ``sac.init_steps``, ``seeds``,
``long_seeds``), so DVC sees exactly what changed; the presets themselves are read by no stage.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import yaml

from ..core.errors import ConfigError
from ..core.files import write_atomic
from .params import apply_preset, dotted_parent, parse_params
from .stage import run_stage


def switch(path: Path, name: str) -> dict:
    """Apply budget ``name`` to the params file at ``path``; returns the applied preset."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedSeq

    if not path.is_file():
        raise ConfigError(f"{path}: params file not found")
    text = path.read_text()
    plain = yaml.safe_load(text)
    budgets = plain.get("budgets") or {}
    if name not in budgets:
        raise ConfigError(f"budget: unknown budget {name!r}; allowed: {', '.join(budgets)}")
    preset = budgets[name]
    parse_params(apply_preset(plain, preset, f"budgets.{name}"))  # validate before writing

    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 100
    rt.indent(mapping=2, sequence=4, offset=2)  # the block-list style params.yaml uses
    doc = rt.load(text)
    for dotted, value in preset.items():
        node, leaf = dotted_parent(doc, dotted, f"budgets.{name}")
        if isinstance(value, list):
            seq = CommentedSeq(value)
            seq.fa.set_flow_style()
            value = seq
        node[leaf] = value
    doc["budget"] = name
    buf = io.StringIO()
    rt.dump(doc, buf)
    write_atomic(path, buf.getvalue())
    return dict(preset)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("name", help="budget preset from params.yaml `budgets:` (small, paper)")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    preset = switch(Path(args.params), args.name)
    print(f"budget {args.name}: " + ", ".join(f"{k}={v}" for k, v in preset.items()))


if __name__ == "__main__":
    run_stage(main)
    sys.exit(0)
