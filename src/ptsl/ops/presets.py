"""The preset switches: ``python -m ptsl.ops.budget paper`` and ``python -m ptsl.ops.protocol
metaworld-plus`` write a preset of params.yaml (``budgets:``, ``protocols:``) into the active
keys, keeping the file's comments, and name it active (``budget:``, ``protocol:``).

Stages read the active keys, so DVC sees exactly what changed; the presets themselves are read by
no training stage.
"""

from __future__ import annotations

import io
from pathlib import Path

import yaml

from ..cli import ArgumentParser
from ..core.errors import ConfigError
from ..core.files import write_atomic
from .params import ACTIVE_KEY, apply_preset, dotted_parent, parse_params


def switch(path: Path, section: str, name: str) -> dict:
    """Apply preset ``name`` of ``section`` (``budgets`` or ``protocols``) to the params file at
    ``path``; returns the applied preset. The result is validated before anything is written."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedSeq

    active_key = ACTIVE_KEY[section]
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found")
    text = path.read_text()
    plain = yaml.safe_load(text)
    presets = plain.get(section) or {}
    if name not in presets:
        raise ConfigError(f"{active_key}: unknown {active_key} {name!r}; allowed: "
                          f"{', '.join(presets)}")
    preset = presets[name]
    parse_params(apply_preset(plain, preset, f"{section}.{name}"))  # validate before writing

    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 100
    rt.indent(mapping=2, sequence=4, offset=2)  # the block-list style params.yaml uses
    # `key: null` stays written out (ruamel would leave the value empty).
    rt.representer.add_representer(type(None), lambda rep, _: rep.represent_scalar(
        "tag:yaml.org,2002:null", "null"))
    doc = rt.load(text)
    for dotted, value in preset.items():
        node, leaf = dotted_parent(doc, dotted, f"{section}.{name}")
        if isinstance(value, list):
            seq = CommentedSeq(value)
            seq.fa.set_flow_style()
            value = seq
        node[leaf] = value
    doc[active_key] = name
    buf = io.StringIO()
    rt.dump(doc, buf)
    write_atomic(path, buf.getvalue())
    return dict(preset)


def main(section: str, doc: str) -> None:
    """The command line of one switch."""
    active_key = ACTIVE_KEY[section]
    ap = ArgumentParser(prog=f"python -m ptsl.ops.{active_key}", description=doc)
    ap.add_argument("name", help=f"{active_key} preset from params.yaml `{section}:`")
    ap.add_argument("--params", default="params.yaml",
                    help="the params file (default: %(default)s)")
    args = ap.parse_args()
    preset = switch(Path(args.params), section, args.name)
    print(f"{active_key} {args.name}: " + ", ".join(f"{k}={v}" for k, v in preset.items()))
