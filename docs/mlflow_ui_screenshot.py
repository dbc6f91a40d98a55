"""Take docs/mlflow-ui.png: MLflow's runs table showing a comparison's headline numbers.

    cd /tmp/shot && PYTHONPATH=/path/to/repo /path/to/repo/.venv/bin/python -m search.cli \\
        compare --task doublemoon --budget quick --num-cpus 2
    .venv/bin/python docs/mlflow_ui_screenshot.py sqlite:////tmp/shot/mlflow.db docs/mlflow-ui.png

(options: --experiment NAME, default the one experiment holding comparison
runs; --size 1900x420; --chromium PATH.)  It starts `mlflow ui` on that store
on 127.0.0.1 (a free port), opens the experiment in headless Chromium
(Debian's `chromium` package) and does what docs/tracking.md's "Comparing runs in
the MLflow UI" says: the Model training view's runs table, the filter
`COMPARISON_FILTER` typed into the search box, the `HEADLINE_COLUMNS` ticked
in the Columns menu.  Then it saves the PNG and stops the browser and the
server (their process groups only).

The browser is driven over the Chrome DevTools Protocol on a pipe
(`--remote-debugging-pipe`: NUL-terminated JSON on fds 3 and 4), standard
library only, no chromedriver.  tests/system/test_mlflow_ui_browser.py runs the
same steps (`show_comparisons`) on a smoke comparison and checks the numbers
the table shows against MLflow's.
"""
from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

# what docs/tracking.md tells a reader to type and to add (the test checks it says so)
COMPARISON_FILTER = "tags.awnn.kind = 'comparison'"
HEADLINE_COLUMNS = ("fixed.total_device_hours", "awnn.total_device_hours", "awnn.savings_vs_fixed", "awnn.savings_vs_fixed_lo",
                    "awnn.savings_vs_fixed_hi", "fixed.test_acc_pct", "awnn.test_acc_pct", "awnn.width_total")
SORT_BY = "awnn.savings_vs_fixed"  # the fixed grid's selection device-hours / AWNN's: > 1, AWNN's search was cheaper


def find_chromium() -> str | None:
    """Chromium's launcher, or None where it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _stop_group(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM the process group `proc` leads (started with start_new_session),
    SIGKILL what is left of it after `timeout` seconds."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader, or the group looks alive
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


# ------------------------------------------------------------- the browser
class BrowserError(RuntimeError):
    """Chromium failed, or the page never showed what was waited for."""


class Chromium:
    """Headless Chromium with one page, driven over DevTools on a pipe.

        with Chromium(find_chromium(), width=1400, height=800) as page:
            page.goto(url); page.wait_for("document.title")
            page.click("document.querySelector('button')")
    """

    def __init__(self, executable: str, *, width: int = 1400, height: int = 800, timeout: float = 60.0):
        self.timeout = timeout
        self._next_id = 0
        self._buf = b""
        self.profile = Path(tempfile.mkdtemp(prefix="awnn-chromium-"))
        self.log_path = self.profile / "chromium.log"
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # the child's ends move above 9, so the shell's `3<&N 4>&M` cannot clobber one with the other
        child_r, child_w = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_r, from_browser_w))
        os.close(to_browser_r)
        os.close(from_browser_w)
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile / 'data'}", f"--window-size={width},{height}", "about:blank"]
        script = f'exec "$0" "$@" 3<&{child_r} 4>&{child_w} {child_r}<&- {child_w}>&-'
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(["bash", "-c", script, executable, *args], pass_fds=(child_r, child_w),
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        os.close(child_r)
        os.close(child_w)
        self._out, self._in = to_browser_w, from_browser_r
        try:
            target = self._call("Target.createTarget", url="about:blank")["targetId"]
            self._session = self._call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        except BaseException:
            self.close()
            raise

    # -- protocol
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise BrowserError(f"Chromium did not answer within {self.timeout:.0f} s\n{self.log_tail()}")
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise BrowserError(f"Chromium closed its DevTools pipe (exit {self.proc.poll()})\n{self.log_tail()}")
            self._buf += chunk
        message, self._buf = self._buf.split(b"\0", 1)
        return json.loads(message)

    def _call(self, method: str, session: str | None = None, **params: Any) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self._out, data):]
        except BrokenPipeError:
            raise BrowserError(f"Chromium is gone (exit {self.proc.poll()})\n{self.log_tail()}") from None
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:  # anything else is an event: not listened to
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply["result"]

    def call(self, method: str, **params: Any) -> dict:
        """A DevTools command on the page."""
        return self._call(method, self._session, **params)

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    # -- page
    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited if a promise), as JSON."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise BrowserError(f"{expression[:200]}: {d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float | None = None) -> Any:
        """Poll `expression` until it is truthy; return its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                text = self.evaluate("document.body ? document.body.innerText.slice(0, 1500) : ''")
                raise BrowserError(f"the page did not show {what} within {timeout or self.timeout:.0f} s; "
                                   f"at {self.evaluate('location.href')} it reads:\n{text}")
            time.sleep(0.25)

    def click(self, element: str, what: str) -> None:
        """A real mouse click in the middle of the element `element` (a JS expression) evaluates to."""
        xy = self.wait_for(f"""(() => {{ const e = {element}; if (!e) return null;
            e.scrollIntoView({{block: 'nearest', inline: 'nearest'}}); const r = e.getBoundingClientRect();
            return r.width && r.height ? [r.x + r.width / 2, r.y + r.height / 2] : null; }})()""", what)
        x, y = xy
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type_text(self, text: str) -> None:
        """Type into the focused element, replacing what is selected."""
        self.call("Input.insertText", text=text)

    def press(self, key: str) -> None:
        code = {"Enter": 13, "Escape": 27}[key]
        extra = {"text": "\r"} if key == "Enter" else {}
        self.call("Input.dispatchKeyEvent", type="keyDown", key=key, code=key, windowsVirtualKeyCode=code, **extra)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=key, windowsVirtualKeyCode=code)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self._call("Browser.close")
                except BrowserError:
                    pass
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            _stop_group(self.proc, timeout=5)
        finally:
            for fd in (self._out, self._in):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._out = self._in = -1
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ------------------------------------------------------------- the MLflow UI
@dataclass
class RunsTable:
    """What MLflow's runs table shows: per row (run id), the text of each
    column, keyed by the column's header (the metric's name, "Run Name", ...)."""
    rows: dict[str, dict[str, str]]
    matching: str  # the "N matching runs" line under the table


_SEARCH_BOX = "document.querySelector('input[data-component-id*=\"runssearchautocomplete\"]')"
_COLUMNS_BUTTON = "[...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Columns')"
_COLUMN_SEARCH = "document.querySelector('input[placeholder=\"Search columns\"]')"

_READ_TABLE = r"""(async () => {
  // ag-grid draws only the columns in view: scroll across, collecting as it goes, then scroll back
  const grid = document.querySelector('.ag-root'); if (!grid) return null;
  const scroller = grid.querySelector('.ag-body-horizontal-scroll-viewport');
  const headers = {}, widths = {}, rows = {};
  const collect = () => {
    for (const h of grid.querySelectorAll('.ag-header-cell[col-id]')) {
      headers[h.getAttribute('col-id')] = h.innerText.trim();
      widths[h.getAttribute('col-id')] = h.getBoundingClientRect().width;
    }
    for (const row of grid.querySelectorAll('.ag-row[row-id]')) {
      const cells = rows[row.getAttribute('row-id')] ??= {};
      for (const c of row.querySelectorAll('.ag-cell[col-id]')) cells[c.getAttribute('col-id')] = c.innerText.trim();
    }
  };
  const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 150)));
  const home = scroller ? scroller.scrollLeft : 0;
  for (let x = 0; ; x += Math.max(100, scroller.clientWidth - 40)) {
    if (scroller) { scroller.scrollLeft = x; await frame(); }
    collect();
    if (!scroller || x + scroller.clientWidth >= scroller.scrollWidth) break;
  }
  if (scroller && scroller.scrollLeft !== home) { scroller.scrollLeft = home; await frame(); }
  const named = {};
  for (const [id, cells] of Object.entries(rows))
    named[id] = Object.fromEntries(Object.entries(cells).map(([col, text]) => [headers[col] || col, text]));
  const status = [...document.querySelectorAll('body div, body span')].find(e => e.children.length <= 1 && /^\d+ matching runs?$/.test((e.innerText || '').trim()));
  return {rows: named, widths, matching: status ? status.innerText.trim() : ''};
})()"""


def read_table(page: Chromium) -> RunsTable:
    t = page.evaluate(_READ_TABLE) or {"rows": {}, "matching": ""}
    return RunsTable(t["rows"], t["matching"])


def show_comparisons(page: Chromium, base_url: str, experiment_id: str, *, search_filter: str = COMPARISON_FILTER,
                     columns: tuple[str, ...] = HEADLINE_COLUMNS, hide: tuple[str, ...] = (),
                     sort_by: str | None = None) -> RunsTable:
    """Open the experiment's runs table, filter it with `search_filter` typed
    into the search box and add `columns` (and take off `hide`) in the Columns
    menu, as a reader would; return what the table then shows.  `sort_by`, a
    metric, sorts it (descending) through the address."""
    # the "Model training" side of the UI (MLflow 3 opens an experiment on its GenAI side)
    query = {"workflowType": "machine_learning"}
    if sort_by:
        query.update(orderByKey=f"metrics.`{sort_by}`", orderByAsc="false")
    page.goto(f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?{urllib.parse.urlencode(query)}")
    page.click(_SEARCH_BOX, "the runs search box")
    page.evaluate(f"{_SEARCH_BOX}.select()")
    page.type_text(search_filter)
    page.press("Enter")
    # the filter is applied once the URL carries it and the grid is drawn
    page.wait_for(f"new URLSearchParams(location.hash.split('?')[1] || '').get('searchFilter') === {json.dumps(search_filter)}"
                  " && !!document.querySelector('.ag-root .ag-row[row-id]')", f"a runs table filtered with {search_filter!r}")
    page.press("Escape")  # close the search box's suggestions, if any
    page.click(_COLUMNS_BUTTON, "the Columns button")
    for name, on in [*((c, True) for c in columns), *((c, False) for c in hide)]:
        _tick_column(page, name, on)
    page.press("Escape")
    page.wait_for(f"!{_COLUMN_SEARCH}", "the Columns menu closed", timeout=10)
    wanted = json.dumps(list(columns))
    page.wait_for(f"""(async () => {{ const t = await {_READ_TABLE}; if (!t) return false;
        return Object.values(t.rows).some(r => {wanted}.every(c => (r[c] ?? '') !== '')); }})()""",
                  f"the columns {', '.join(columns)} filled in")
    return read_table(page)


def _tick_column(page: Chromium, name: str, on: bool) -> None:
    """In the open Columns menu: find column `name` with the menu's search box and (un)tick it."""
    page.click(_COLUMN_SEARCH, "the Columns menu's search box")
    page.evaluate(f"{_COLUMN_SEARCH}.select()")
    page.type_text(name)
    node = (f"[...document.querySelectorAll('.du-bois-light-tree-treenode')]"
            f".find(n => n.querySelector('.du-bois-light-tree-title')?.innerText.trim() === {json.dumps(name)})")
    checked = f"!!{node}?.querySelector('.du-bois-light-tree-checkbox-checked')"
    state = page.wait_for(f"{node} ? ({checked} ? 'on' : 'off') : null", f"the column {name!r} in the Columns menu")
    if (state == "on") != on:
        page.click(f"{node}?.querySelector('.du-bois-light-tree-checkbox')", f"the checkbox of column {name!r}")
        page.wait_for(f"{checked} === {json.dumps(on)}", f"the column {name!r} {'ticked' if on else 'unticked'}")


def fit_columns(page: Chromium, columns: tuple[str, ...] = HEADLINE_COLUMNS, padding: int = 28) -> None:
    """Put the metric `columns` first, in that order, each as wide as its name.

    The runs table keeps its column order and widths in the experiment page's
    state in localStorage (what dragging a column or its edge saves); this
    writes them there and reloads the page, for the screenshot only."""
    ids = json.dumps([f"metrics.`{c}`" for c in columns])
    width_of_first = page.evaluate(f"""(async () => {{
      const key = Object.keys(localStorage).find(k => k.includes('-ExperimentPage-') && k.endsWith('-ReactComponentState'));
      const state = JSON.parse(localStorage.getItem(key));
      const wanted = {ids};
      const shown = Object.keys((await {_READ_TABLE}).widths).filter(id => id !== '0');  // every column, drawn or not
      const others = shown.filter(id => !wanted.includes(id));
      const metricsAt = others.findIndex(id => id.startsWith('metrics.'));
      const at = metricsAt < 0 ? others.length : metricsAt;
      state.columnOrder = [...others.slice(0, at), ...wanted, ...others.slice(at)];
      state.columnWidths = state.columnWidths || {{}};
      // a header's label, for its font: every header is set alike
      const header = document.querySelector('.ag-header-cell[col-id]:not([col-id="0"])');
      const label = [...header.querySelectorAll('*')].find(e => e.childElementCount === 0 && e.textContent.trim());
      for (const id of wanted) {{
        const probe = document.createElement('span');
        probe.textContent = id.slice('metrics.`'.length, -1);
        probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap';
        label.parentElement.appendChild(probe);
        state.columnWidths[id] = Math.ceil(probe.offsetWidth) + {padding};
        probe.remove();
      }}
      localStorage.setItem(key, JSON.stringify(state));
      return state.columnWidths[wanted[0]];
    }})()""")
    page.call("Page.reload")
    first = json.dumps(f"metrics.`{columns[0]}`")
    page.wait_for(f"""(async () => {{ const t = await {_READ_TABLE};
        return !!t && Object.keys(t.rows).length > 0 && t.widths[{first}] === {width_of_first}; }})()""",
                  "the runs table with the columns rearranged")


def tidy_for_screenshot(page: Chromium) -> None:
    """Close the assistant's panel and fold the side bar, so the table gets the width."""
    for component, what in (("mlflow.assistant.chat_panel.close", "the assistant's close button"),
                            ("mlflow_header.toggle_sidebar_button", "the side bar's toggle")):
        button = f"document.querySelector('button[data-component-id=\"{component}\"]')"
        if page.evaluate(f"!!{button}"):
            page.click(button, what)
    page.call("Input.dispatchMouseEvent", type="mouseMoved", x=0, y=0)  # no hover highlight
    page.evaluate("document.activeElement && document.activeElement.blur()")
    time.sleep(1.0)  # the panels' transitions


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mlflow_ui(tracking_uri: str, timeout: float = 90.0) -> Iterator[str]:
    """`mlflow ui` on `tracking_uri`, on 127.0.0.1 and a free port; yields its URL."""
    work = Path(tempfile.mkdtemp(prefix="awnn-mlflow-ui-"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    log = work / "mlflow-ui.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", tracking_uri, "--host", "127.0.0.1",
                                 "--port", str(port), "--workers", "1", "--artifacts-destination", (work / "artifacts").as_uri()],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=work,
                                start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow ui exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow ui did not answer within {timeout:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        _stop_group(proc)
        shutil.rmtree(work, ignore_errors=True)


def comparison_experiment(tracking_uri: str, name: str | None = None) -> tuple[str, str]:
    """(id, name) of experiment `name`, or of the one experiment holding comparison runs."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    if name:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise SystemExit(f"no experiment {name!r} in {tracking_uri}")
        return exp.experiment_id, exp.name
    found = [e for e in client.search_experiments() if client.search_runs([e.experiment_id], COMPARISON_FILTER, max_results=1)]
    if len(found) != 1:
        raise SystemExit(f"{len(found)} experiments in {tracking_uri} hold comparison runs; name one with --experiment")
    return found[0].experiment_id, found[0].name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tracking_uri", help="the comparison's MLflow store, e.g. sqlite:///mlflow.db")
    ap.add_argument("output", type=Path, help="the PNG to write, e.g. docs/mlflow-ui.png")
    ap.add_argument("--experiment", help="experiment name (default: the one holding comparison runs)")
    ap.add_argument("--size", default="1900x420", help="viewport WIDTHxHEIGHT (default 1900x420: the headline columns side by side)")
    ap.add_argument("--chromium", default=find_chromium(), help="Chromium executable (default: chromium on PATH)")
    a = ap.parse_args(argv)
    if not a.chromium:
        raise SystemExit("needs Chromium: apt-get install chromium")
    width, height = (int(v) for v in a.size.lower().split("x"))
    experiment_id, name = comparison_experiment(a.tracking_uri, a.experiment)
    with mlflow_ui(a.tracking_uri) as url, Chromium(a.chromium, width=width, height=height) as page:
        table = show_comparisons(page, url, experiment_id, hide=("Dataset", "Source", "Models"), sort_by=SORT_BY)
        fit_columns(page)
        tidy_for_screenshot(page)
        page.screenshot(a.output)
    print(f"{a.output}: {name}, {table.matching or len(table.rows)}; " +
          "; ".join(f"{c}={row.get(c)}" for row in table.rows.values() for c in HEADLINE_COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
