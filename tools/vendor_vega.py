"""Write .dvc/plots/offline.html: DVC's HTML page template for `dvc plots show` with the charting
library inlined, so the page draws its charts without a network connection.

DVC's default page loads vega, vega-lite and vega-embed from a CDN; this template leaves out
DVC's `{scripts}` placeholder (so no CDN tags are added) and carries the same versions instead.
Regenerate (needs npm and the network, once):

    cd /tmp && npm pack vega@5.20.2 vega-lite@5.2.0 vega-embed@6.18.2
    python tools/vendor_vega.py /tmp/vega-5.20.2.tgz /tmp/vega-lite-5.2.0.tgz /tmp/vega-embed-6.18.2.tgz
"""

from __future__ import annotations

import hashlib
import re
import sys
import tarfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / ".dvc" / "plots" / "offline.html"
BUNDLES = {"vega": "package/build/vega.min.js", "vega-lite": "package/build/vega-lite.min.js",
           "vega-embed": "package/build/vega-embed.min.js"}

# Every chart is titled from its data: the aggregate stage writes a `title` column into each
# plot CSV (the table's title, or the experiment and seed of a run). DVC itself would title
# every chart of a folder alike. The dashed-line legend of revisions only matters when the page
# compares several (`dvc plots diff`).
TITLE_FROM_DATA = """
const embedChart = window.vegaEmbed;
window.vegaEmbed = function (el, spec, opts) {
  const rows = spec && spec.data && spec.data.values;
  if (rows && rows.length && rows[0].title) {
    spec.title = Object.assign({}, spec.title, {text: rows[0].title, anchor: "start"});
  }
  if (rows && spec.encoding && new Set(rows.map(r => r.rev)).size < 2) {
    delete spec.encoding.strokeDash;
  }
  return embedChart(el, spec, Object.assign({actions: {export: true, source: false,
                                                         compiled: false, editor: false}}, opts));
};
"""

PAGE = """<!DOCTYPE html>
<html>
<head>
{{refresh_tag}}
<meta charset="utf-8">
<title>PTSL: evaluation success curves</title>
<!-- {provenance} -->
{scripts}
<script>{title_from_data}</script>
<style>
  body {{ font-family: sans-serif; margin: 16px; }}
  body > div {{ display: inline-block; vertical-align: top; margin: 0 12px 16px 0; }}
</style>
</head>
<body>
<h2>Evaluation success: one chart per table (mean over seeds), then one per run</h2>
{{plot_divs}}
</body>
</html>
"""


def main(paths: list[str]) -> None:
    scripts, provenance = [], []
    for path in paths:
        name, version = re.match(r"(vega(?:-lite|-embed)?)-(\d+\.\d+\.\d+)\.tgz$",
                                 Path(path).name).groups()
        with tarfile.open(path) as tar:
            js = tar.extractfile(BUNDLES[name]).read().decode("utf-8")
        if "</script" in js:
            raise SystemExit(f"{path}: cannot be inlined (contains </script)")
        scripts.append(f"<script>{js}</script>")
        provenance.append(f"{name} {version} (BSD-3-Clause, https://vega.github.io; "
                          f"build sha256 {hashlib.sha256(js.encode()).hexdigest()[:16]})")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(PAGE.format(provenance="; ".join(provenance) + "; written by tools/vendor_vega.py",
                               scripts="\n".join(scripts), title_from_data=TITLE_FROM_DATA))
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(sys.argv[1:])
