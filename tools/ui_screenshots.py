"""The MLflow UI's screenshots in docs/views.md, taken in headless Chromium as a reader sees them.

A documentation step, not part of the pipeline or its tests. It needs Debian's ``chromium`` and
``chromium-driver`` and the ``selenium`` package (in any Python, e.g. a scratch venv: it does not
import the project or MLflow), and a UI that ``make ui`` serves, here after
``make study-mt10-cpu``::

    make ui UI_PORT=5069 &                       # wait for its "MLflow UI at ..." line
    python tools/ui_screenshots.py --url http://127.0.0.1:5069 --experiment mt10-cpu/train \\
        --run mt10_care_ptsl-1

It opens each page in a new browser profile (as a first visit: MLflow's own toggle still on its
GenAI side), at the address ``make ui`` prints (``workflowType=machine_learning``), closes the
assistant panel and the shared-view notice, waits until the page has drawn, and writes
``docs/mlflow_experiments.png`` (the experiments list), ``docs/mlflow_runs.png`` (the study's
runs in the saved "Compare runs" view) and ``docs/mlflow_run_charts.png`` (one run's curves).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

DOCS = Path(__file__).resolve().parents[1] / "docs"
SIDE = "workflowType=machine_learning"
# Chromium as root in a container, offline: no sandbox, no GPU, nothing fetched in the background.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars")


def api(base: str, path: str, body: dict | None = None) -> dict:
    """A call of MLflow's REST API (the UI's own server)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{base}/ajax-api/2.0/mlflow/{path}", data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - the local UI
        return json.loads(resp.read())


def browser(width: int, height: int) -> webdriver.Chrome:
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for flag in (*FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='ui-shots-')}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1,
                            "mobile": False})
    return driver


def click(driver: webdriver.Chrome, component: str, timeout: float = 60) -> None:
    """Click the element MLflow names ``component`` once it is there."""
    deadline = time.monotonic() + timeout
    while True:
        found = driver.find_elements(By.CSS_SELECTOR, f'[data-component-id="{component}"]')
        if found:
            found[0].click()
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"error: {driver.current_url}: no {component!r} after {timeout} s")
        time.sleep(0.5)


def wait_for(driver: webdriver.Chrome, css: str, count: int = 1, timeout: float = 120) -> None:
    """Wait until ``count`` elements match ``css`` (the page has drawn them)."""
    deadline = time.monotonic() + timeout
    while len(driver.find_elements(By.CSS_SELECTOR, css)) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"error: {driver.current_url}: fewer than {count} {css!r} after "
                             f"{timeout} s")
        time.sleep(0.5)


def shoot(args: argparse.Namespace, url: str, out: Path, ready, height: int = 900) -> None:
    """Open ``url`` in a new profile, let ``ready(driver)`` prepare the page, write ``out``."""
    driver = browser(args.width, height)
    try:
        driver.get(url)
        click(driver, "mlflow.assistant.chat_panel.close")
        ready(driver)
        time.sleep(args.settle)  # the last transitions and redraws
        driver.save_screenshot(str(out))
    except WebDriverException as exc:
        raise SystemExit(f"error: {url}: {exc.msg}") from None
    finally:
        driver.quit()
    print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:5000", help="the UI (default: %(default)s)")
    ap.add_argument("--experiment", default="mt10-cpu/train", help="its runs list is shown")
    ap.add_argument("--run", default="mt10_care_ptsl-1", help="its charts are shown")
    ap.add_argument("--metric", default="eval/success",
                    help="the charts shown: those whose name holds this (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=DOCS, help="folder (default: docs/)")
    ap.add_argument("--width", type=int, default=1500)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds after drawing")
    args = ap.parse_args()
    base = args.url.rstrip("/")
    exp = api(base, "experiments/get-by-name?experiment_name="
              + urllib.parse.quote(args.experiment))["experiment"]
    found = api(base, "runs/search", {"experiment_ids": [exp["experiment_id"]],
                                      "filter": f"attributes.run_name = '{args.run}'"})
    if not found.get("runs"):
        raise SystemExit(f"error: --run: no run {args.run!r} in {args.experiment}")
    run_id = found["runs"][0]["info"]["run_id"]

    def experiments(driver):
        wait_for(driver, 'a[href*="/experiments/"]', 2)

    def runs(driver):
        click(driver, "mlflow.experiment_page.shared_view.dismiss")
        wait_for(driver, '[role="row"]', 10)

    def charts(driver):
        search = 'input[placeholder="Search metric charts"]'
        wait_for(driver, search)
        driver.find_element(By.CSS_SELECTOR, search).send_keys(args.metric, Keys.ENTER)
        wait_for(driver, ".js-plotly-plot .scatterlayer .trace", 2)
        driver.execute_script("document.activeElement.blur()")  # no text cursor in the shot

    shoot(args, f"{base}/#/experiments?{SIDE}", args.out / "mlflow_experiments.png",
          experiments, height=520)
    shoot(args, f"{base}/#/experiments/{exp['experiment_id']}/runs?{SIDE}"
                "&viewStateShareKey=compare", args.out / "mlflow_runs.png", runs)
    shoot(args, f"{base}/#/experiments/{exp['experiment_id']}/runs/{run_id}/model-metrics"
                f"?{SIDE}", args.out / "mlflow_run_charts.png", charts)


if __name__ == "__main__":
    main()
