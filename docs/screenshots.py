"""Retake the documentation's screenshots of the Prefect UI.

    python docs/screenshots.py [--out docs/images]

Starts a real `prefect server start` (UI on) on 127.0.0.1 with a temporary PREFECT_HOME,
serves the `ingest` deployment from deployments/prefect.yaml (deployments/serve.py), runs it
once on examples/ into a temporary index so that its report artifact exists, and has headless
Chromium take two pictures: the deployment's custom run form (run-form.png) and the run's
report artifact (run-report.png). Needs Debian's `chromium` and the `screenshots` extra (playwright;
its own browser downloads are not used). Everything started here is stopped at the end.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import httpx

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from tests import prefect_server as stack  # the repository's own helpers, after sys.path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 1100}
DEPLOYMENT = "propdex-ingest/ingest"
ARTIFACT_KEY = "propdex-ingest-report"


class ScreenshotError(RuntimeError):
    """The server, the run or the browser did not get where a picture needs it."""


def ui_environment(home: Path, port: int, db_root: Path) -> dict[str, str]:
    """The test stack's environment with the UI on, and the temporary index allowed."""
    env = stack.prefect_environment(home, port)
    env["PREFECT_SERVER_UI_ENABLED"] = "true"
    env["PROPDEX_ALLOWED_DB_ROOTS"] = str(db_root)
    return env


def run_ingest_deployment(env: dict[str, str], db: Path) -> str:
    """Run the served `ingest` deployment once on its default sources; return the run's id."""
    output = stack.run_prefect(["deployment", "run", DEPLOYMENT, "--param", f"db={db}", "--watch",
                          "--watch-timeout", "900"], env, timeout=960)
    found = re.search(r"UUID: ([0-9a-f-]{36})", output)
    if not found:
        raise ScreenshotError(f"no flow run id in the output:\n{output}")
    run = httpx.get(f"{env['PREFECT_API_URL']}/flow_runs/{found.group(1)}", timeout=30).json()
    if run["state_type"] != "COMPLETED":
        raise ScreenshotError(f"the ingest run ended {run['state_type']}:\n{output}")
    return run["id"]


def artifact_id(api: str, flow_run_id: str) -> str:
    found = httpx.post(f"{api}/artifacts/filter", json={
        "artifacts": {"key": {"any_": [ARTIFACT_KEY]},
                      "flow_run_id": {"any_": [flow_run_id]}}}, timeout=30).json()
    if not found:
        raise ScreenshotError(f"run {flow_run_id} left no {ARTIFACT_KEY} artifact")
    return found[0]["id"]


def deployment_id(api: str) -> str:
    flow, name = DEPLOYMENT.split("/")
    return httpx.get(f"{api}/deployments/name/{flow}/{name}", timeout=30).json()["id"]


def take_screenshots(ui: str, pages: dict[str, str], out: Path) -> None:
    """Open each UI path in headless Chromium and save the viewport as out/<name>."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise ScreenshotError("the screenshots need playwright: pip install -e '.[screenshots]' "
                              "(and Debian's chromium: apt-get install chromium)") from exc

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            for name, path in pages.items():
                page.goto(f"{ui}{path}", wait_until="networkidle", timeout=120_000)
                page.wait_for_timeout(2000)  # the UI renders after its data requests settle
                page.screenshot(path=str(out / name))
                print(f"wrote {out / name}")
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPOSITORY / "docs" / "images",
                        help="folder the PNG files are written to (default docs/images)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="propdex-screenshots-") as tmp:
        home, port = Path(tmp) / "prefect", stack.free_port()
        home.mkdir()
        env = ui_environment(home, port, Path(tmp))
        server = stack.start_process("server", stack.prefect_command(
            "server", "start", "--host", "127.0.0.1", "--port", str(port)), env, home / "server.log")
        served = None
        try:
            api = env["PREFECT_API_URL"]
            stack.wait_for(lambda: stack.api_healthy(api), timeout=300, what="the Prefect server",
                     alive=server.check_alive)
            served = stack.start_process("serve", [sys.executable, "deployments/serve.py", "ingest"],
                                   env, home / "serve.log", cwd=REPOSITORY)
            stack.wait_for(lambda: httpx.get(f"{api}/deployments/name/propdex-ingest/ingest",
                                       timeout=10).status_code == 200,
                     timeout=300, what="the ingest deployment", alive=served.check_alive)
            flow_run = run_ingest_deployment(env, Path(tmp) / "propdex-db")
            ui = f"http://127.0.0.1:{port}"
            take_screenshots(ui, {
                "run-form.png": f"/deployments/deployment/{deployment_id(api)}/run",
                "run-report.png": f"/artifacts/artifact/{artifact_id(api, flow_run)}",
            }, args.out)
        finally:
            if served is not None:
                stack.stop_process(served)
            stack.stop_process(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
