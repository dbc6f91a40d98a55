"""Take docs/mlflow-ui.png: MLflow's runs table showing a comparison's headline numbers.

    cd /tmp/shot && PYTHONPATH=/path/to/repo /path/to/repo/.venv/bin/python -m search.cli \\
        compare --task doublemoon --budget quick --num-cpus 2
    .venv/bin/python docs/mlflow_ui_screenshot.py sqlite:////tmp/shot/mlflow.db docs/mlflow-ui.png

(options: --experiment NAME, default the one experiment holding comparison
runs; --size 1900x420; --chromium PATH; --trials ID: the trials of the
comparison whose `awnn.comparison` tag is ID instead, docs/tracking.md's
"One comparison's trials" steps.)  It starts `mlflow ui` on that store
on 127.0.0.1 (a free port), opens the experiment in headless Chromium
(Debian's `chromium` package) and does what docs/tracking.md's "Comparing runs in
the MLflow UI" says: the Model training view's runs table, the filter
`COMPARISON_FILTER` typed into the search box, the `HEADLINE_COLUMNS` ticked
in the Columns menu.  Then it saves the PNG and stops the browser and the
server (their process groups only).

The browser is driven over the Chrome DevTools Protocol on a pipe
(`--remote-debugging-pipe`: NUL-terminated JSON on fds 3 and 4), standard
library only, no chromedriver.  tests/system/test_mlflow_ui_browser.py runs the
same steps (`show_comparisons`, `show_trials`) on a smoke comparison and checks
the numbers the table shows against MLflow's.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

# what docs/tracking.md tells a reader to type and to add (the test checks it says so)
COMPARISON_FILTER = "tags.awnn.kind = 'comparison'"
HEADLINE_COLUMNS = ("fixed.total_device_hours", "awnn.total_device_hours", "awnn.savings_vs_fixed", "awnn.savings_vs_fixed_lo",
                    "awnn.savings_vs_fixed_hi", "fixed.test_acc_pct", "awnn.test_acc_pct", "awnn.width_total")
SORT_BY = "awnn.savings_vs_fixed"  # the fixed grid's selection device-hours / AWNN's: > 1, AWNN's search was cheaper

# docs/tracking.md's "One comparison's trials": trials are child runs of a sweep
# run (itself a child of the comparison run), and the runs table sorted by
# Created (its default) nests child runs under their parent, collapsed: the
# filter alone shows the sweep runs.  Sorted by anything else (MLflow 3's
# runs table nests only when sorted by start time, or unsorted and unfiltered)
# it lists the matching runs flat: sorted by `test_acc`, descending, the
# re-training trials (the only ones with a test_acc) come first.
TRIAL_FILTER = "tags.awnn.kind = 'trial' and tags.awnn.comparison = '{comparison}'"
TRIAL_SORT = "test_acc"
TRIAL_COLUMNS = ("test_acc", "device_hours", "awnn.arm", "awnn.phase")  # two metrics, two tags


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


_COUNT_FETCHES = """(() => { if (window.__awnnPending !== undefined) return; window.__awnnPending = 0;
  const fetch = window.fetch;
  window.fetch = async (...args) => { window.__awnnPending++;
    try { return await fetch(...args); } finally { window.__awnnPending--; } }; })()"""
# no fetch() unanswered (true on a page whose fetches are not counted)
IDLE = "!(window.__awnnPending > 0)"


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

    def watch_fetches(self) -> None:
        """From the next page on, count the page's fetch() calls still unanswered in `window.__awnnPending` (read by
        IDLE): a page's own state cannot tell a search answer on its way.  Once per browser."""
        if not getattr(self, "_watching", False):
            self.call("Page.enable")
            self.call("Page.addScriptToEvaluateOnNewDocument", source=_COUNT_FETCHES)
            self._watching = True

    def reload(self, timeout: float | None = None) -> None:
        """Load the page again from its server and wait until the new document has loaded (`timeout` s; navigating
        to its own address, which differs from the page's only in what follows '#', would not load it: the page would
        stay, the same document).  Waiting matters on a loaded machine: a reload sent while the last one still loads
        cancels it, and a CI run's page then never finished one (0 of ~3 reloads in 4 s)."""
        self.evaluate("window.__awnnOldDocument = true")
        self.call("Page.reload", ignoreCache=True)
        self.wait_for("!window.__awnnOldDocument && document.readyState === 'complete'", "the reloaded page", timeout)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited if a promise), as JSON."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise BrowserError(f"{expression[:200]}: {d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float | None = None) -> Any:
        """Poll `expression` until it is truthy; return its value.  An
        expression that throws counts as not yet (a page that is navigating
        has no body for a moment); the last error is in the timeout's message."""
        deadline = time.monotonic() + (timeout or self.timeout)
        error = None
        while True:
            try:
                value = self.evaluate(expression)
            except BrowserError as e:
                if self.proc.poll() is not None:  # Chromium is gone: no use waiting
                    raise
                value, error = None, e
            if value:
                return value
            if time.monotonic() > deadline:
                text = self.evaluate("document.body ? document.body.innerText.slice(0, 1500) : ''")
                last = f"; the last try threw {error}" if error else ""
                raise BrowserError(f"the page did not show {what} within {timeout or self.timeout:.0f} s{last}; "
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
    order: list[str] = field(default_factory=list)  # the rows' ids, top to bottom
    visible: list[str] = field(default_factory=list)  # those in view (in the window and the table's scrolled area)


_SEARCH_BOX = "document.querySelector('input[data-component-id*=\"runssearchautocomplete\"]')"
_COLUMNS_BUTTON = "[...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Columns')"
_COLUMN_SEARCH = "document.querySelector('input[placeholder=\"Search columns\"]')"

_READ_TABLE = r"""(async () => {
  // ag-grid draws only the columns in view: scroll across, collecting as it goes, then scroll back
  const grid = document.querySelector('.ag-root'); if (!grid) return null;
  const scroller = grid.querySelector('.ag-body-horizontal-scroll-viewport');
  const headers = {}, widths = {}, rows = {}, index = {}, inView = {};
  const body = grid.querySelector('.ag-body-viewport') || grid;
  const collect = () => {
    for (const h of grid.querySelectorAll('.ag-header-cell[col-id]')) {
      headers[h.getAttribute('col-id')] = h.innerText.trim();
      widths[h.getAttribute('col-id')] = h.getBoundingClientRect().width;
    }
    const b = body.getBoundingClientRect();
    const top = Math.max(b.top, 0), bottom = Math.min(b.bottom, window.innerHeight);
    for (const row of grid.querySelectorAll('.ag-row[row-id]')) {
      const id = row.getAttribute('row-id');
      const cells = rows[id] ??= {};
      for (const c of row.querySelectorAll('.ag-cell[col-id]')) cells[c.getAttribute('col-id')] = c.innerText.trim();
      index[id] = Number(row.getAttribute('row-index'));
      const r = row.getBoundingClientRect(), middle = (r.top + r.bottom) / 2;
      if (r.height && middle > top && middle < bottom) inView[id] = true;  // scrolling across does not move rows up or down
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
  const order = Object.keys(rows).sort((a, b) => index[a] - index[b]);
  return {rows: named, widths, matching: status ? status.innerText.trim() : '', order, visible: order.filter(id => inView[id])};
})()"""


def read_table(page: Chromium) -> RunsTable:
    t = page.evaluate(_READ_TABLE) or {"rows": {}, "matching": "", "order": [], "visible": []}
    return RunsTable(t["rows"], t["matching"], t["order"], t["visible"])


def show_comparisons(page: Chromium, base_url: str, experiment_id: str, *, search_filter: str = COMPARISON_FILTER,
                     columns: tuple[str, ...] = HEADLINE_COLUMNS, hide: tuple[str, ...] = (),
                     sort_by: str | None = None, matching: int | None = None) -> RunsTable:
    """Open the experiment's runs table, filter it with `search_filter` typed
    into the search box and add `columns` (and take off `hide`) in the Columns
    menu, as a reader would; return what the table then shows.  `sort_by`, a
    metric, sorts it (descending) through the address; `matching`: the number
    of runs the filter matches in the store, when known (see filter_runs)."""
    query = {}
    if sort_by:
        query.update(orderByKey=f"metrics.`{sort_by}`", orderByAsc="false")
    open_runs_table(page, base_url, experiment_id, query)
    filter_runs(page, search_filter, matching_runs=matching)
    return choose_columns(page, columns, hide)


def show_trials(page: Chromium, base_url: str, experiment_id: str, comparison: str, *,
                columns: tuple[str, ...] = TRIAL_COLUMNS, sort_by: str | None = TRIAL_SORT,
                matching: int | None = None) -> RunsTable:
    """docs/tracking.md's "One comparison's trials": the runs table filtered to
    the trials of the comparison whose `awnn.comparison` tag is `comparison`,
    sorted by the metric `sort_by` (descending) in the Sort menu, `columns`
    ticked in the Columns menu; return what the table then shows.

    The Sort step is what lists the trials: `sort_by=None` leaves the table
    sorted by Created, where MLflow nests them under their (collapsed) sweep
    runs and the table shows those instead.  `matching`: as for show_comparisons."""
    open_runs_table(page, base_url, experiment_id)
    # sorted by Created the table counts what it shows nested (the sweep runs): the trials' count comes with the sort
    filter_runs(page, TRIAL_FILTER.format(comparison=comparison), matching_runs=None if sort_by else matching)
    if sort_by:
        sort_runs(page, sort_by)
        if matching is not None:
            wait_for_count(page, matching)
    return choose_columns(page, columns)


def open_runs_table(page: Chromium, base_url: str, experiment_id: str, query: dict[str, str] | None = None) -> None:
    """The experiment's runs table, on the "Model training" side of the UI
    (MLflow 3 opens an experiment on its GenAI side)."""
    query = {"workflowType": "machine_learning", **(query or {})}
    page.watch_fetches()
    page.goto(f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?{urllib.parse.urlencode(query)}")


def matching_text(n: int) -> str:
    """The table's count line for `n` runs."""
    return f"{n} matching run{'' if n == 1 else 's'}"


def count_matching(tracking_uri: str, experiment_id: str, search_filter: str) -> int:
    """How many runs of the experiment `search_filter` matches in the store (what the table's count should say)."""
    from mlflow.tracking import MlflowClient

    return len(MlflowClient(tracking_uri).search_runs([experiment_id], search_filter, max_results=50000))


def filter_runs(page: Chromium, search_filter: str, matching_runs: int | None = None) -> None:
    """Type `search_filter` into the runs search box and press Enter.

    `matching_runs`: the number of runs the filter matches in the store, when the
    caller knows it: the wait for the count line then waits for that number
    (30 s at most; what the line shows after is the caller's to check).

    The filter is typed once the table has loaded, as a reader would: the UI
    (MLflow 3.x) takes the count line from whichever search answer comes
    last, so an unfiltered first load still on its way when the filtered
    one is sent puts the unfiltered count (45) under the filtered rows when
    it lands, and for good.  Two loaded CI runs read that; delaying the
    first load's answer by 6 s in the page reproduces it every time.

    Typed as a reader does in MLflow 3.17 and 3.18: the filter, Esc (the
    box's suggestions closed), Enter."""
    matching = _MATCHING
    page.click(_SEARCH_BOX, "the runs search box")  # waits for the page (document.body is null while it navigates)
    # the unfiltered table loaded first: its count drawn, no loading overlay (so no search answer on its way), and the
    # count kept so that the filtered one can be told from it; an experiment whose table shows no count: 60 s, then ''
    before = ""
    try:
        before = page.wait_for(_still(f"{IDLE} && !{_LOADING} && {matching}"), "the runs table loaded", timeout=60)
    except BrowserError:
        pass
    page.evaluate(f"{_SEARCH_BOX}.select()")
    page.type_text(search_filter)
    # the suggestions closed first: with them open, MLflow 3.18's Enter picks one (rewriting a dotted tag key in
    # backticks, tags.`awnn.kind`) and applies nothing; a second Enter would.  3.17's Enter applied the filter
    # either way.  (CI on 2026-12-07, MLflow 3.18.0: "did not show a runs table filtered with ...")
    page.press("Escape")
    page.press("Enter")
    # the filter is applied once the URL carries it and the grid is drawn
    page.wait_for(f"{_URL_PARAM}('searchFilter') === {json.dumps(search_filter)}"
                  " && !!document.querySelector('.ag-root .ag-row[row-id]')", f"a runs table filtered with {search_filter!r}")
    # ... and its "N matching runs" line has changed; a filter that matches as many runs as before: 10 s
    if matching_runs is None:
        try:
            page.wait_for(f"!{_LOADING} && {matching} !== {json.dumps(before)}", "the filtered count", timeout=10)
        except BrowserError:
            pass
    else:
        wait_for_count(page, matching_runs)
    page.press("Escape")  # close the search box's suggestions, if any
    _wait_settled(page)


_MATCHING = "(document.body?.innerText.match(/\\d+ matching runs?/)?.[0] || '')"


def _still(expression: str, ms: int = 500) -> str:
    """A JS expression: `expression`'s value when it is truthy and the same `ms` later (what is polled in between
    two requests of a page's load holds for a moment only)."""
    return (f"(async () => {{ const a = {expression}; if (!a) return a; await new Promise(r => setTimeout(r, {ms})); "
            f"const b = {expression}; return a === b ? b : null; }})()")


# the grid's loading overlay is drawn (a search answer is on its way)
_LOADING = "[...document.querySelectorAll('.ag-overlay-loading-wrapper')].some(e => e.getBoundingClientRect().height > 0)"


def wait_for_count(page: Chromium, n: int, timeout: float = 30, first: float = 10) -> None:
    """Wait for the table's count line to read `n` runs; what it reads after is the caller's to check.

    Where it does not come within `first` s, the page is reloaded (its address carries the filter and the sort, so
    its first search is the filtered one), as a reader would press reload, and waited for again, `first` s a reload,
    until `timeout` s more have passed.  (Until 2026-12-04 the "reload" navigated to the page's own address, which
    only moves within the page: the count line a stale answer had set stayed, reloads or not.)"""
    import time

    expected = f"{_MATCHING} === {json.dumps(matching_text(n))}"
    try:
        page.wait_for(expected, f"the count {matching_text(n)!r}", timeout=min(first, timeout))
        return
    except BrowserError:
        pass
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 1:
        try:
            page.reload(timeout=left)
            page.wait_for("!!document.querySelector('.ag-root .ag-row[row-id]') && " + expected,
                          f"the count {matching_text(n)!r} after a reload", timeout=max(0.1, min(first, end - time.monotonic())))
            return
        except BrowserError:
            pass


def sort_runs(page: Chromium, metric: str, descending: bool = True) -> None:
    """In the Sort menu ("Sort: Created" at first): the direction, then the
    metric `metric`, found with the menu's search box."""
    direction = "desc" if descending else "asc"
    page.click(_SORT_BUTTON, "the Sort button")
    page.click(f"document.querySelector('button[data-testid=\"sort-select-{direction}\"]')",
               f"the Sort menu's {direction}ending button")
    if not page.evaluate(f"!!{_SORT_SEARCH}"):  # the direction closed the menu: open it again
        page.click(_SORT_BUTTON, "the Sort button")
    page.click(_SORT_SEARCH, "the Sort menu's search box")
    page.evaluate(f"{_SORT_SEARCH}.select()")
    page.type_text(metric)
    item = f"document.querySelector('[role=menuitemcheckbox][data-testid={json.dumps('sort-select-' + metric)}]')"
    _wait_still(page, item, f"{metric!r} in the Sort menu")
    page.click(item, f"{metric!r} in the Sort menu")
    key = f"metrics.`{metric}`"
    page.wait_for(f"{_URL_PARAM}('orderByKey') === {json.dumps(key)} && {_URL_PARAM}('orderByAsc') === {json.dumps(str(not descending).lower())}",
                  f"the runs table sorted by {metric} ({direction}ending)")
    if page.evaluate(f"!!{_SORT_SEARCH}"):
        page.press("Escape")
    _wait_settled(page)


def choose_columns(page: Chromium, columns: tuple[str, ...], hide: tuple[str, ...] = ()) -> RunsTable:
    """In the Columns menu: tick `columns`, untick `hide`; wait for a row with
    every one of `columns` filled in and return what the table shows."""
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


_URL_PARAM = "new URLSearchParams(location.hash.split('?')[1] || '').get"
_SORT_BUTTON = "document.querySelector('button[data-component-id=\"mlflow.experiment_page.sort_select_v2.toggle\"]')"
_SORT_SEARCH = "document.querySelector('input[data-component-id$=\"experimentviewrunssortselectorv2.tsx_97\"]')"


def _wait_still(page: Chromium, element: str, what: str) -> None:
    """Wait until `element` is drawn and stays put for 0.3 s (a menu's list
    filters as one types: a click on a row still moving lands on another)."""
    page.wait_for(f"""(async () => {{
        const at = () => {{ const e = {element}; if (!e) return null; const r = e.getBoundingClientRect();
                            return r.width && r.height ? [r.x, r.y, r.width, r.height].join() : null; }};
        const before = at(); await new Promise(r => setTimeout(r, 300)); return before !== null && before === at(); }})()""",
                  what)


def _wait_settled(page: Chromium) -> None:
    """Wait until the runs table's rows and its "N matching runs" line stay the same for half a second."""
    snapshot = ("[[...document.querySelectorAll('.ag-root .ag-row[row-id]')].map(r => r.getAttribute('row-id') + ':' + "
                "r.getAttribute('row-index')).join(), document.body?.innerText.match(/\\d+ matching runs?/)?.[0]].join('|')")
    page.wait_for(f"""(async () => {{ const before = {snapshot}; await new Promise(r => setTimeout(r, 500));
        return {IDLE} && !{_LOADING} && before === {snapshot} && before.split('|')[1] !== ''; }})()""",
                  "the runs table settled")


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
        box = f"{node}?.querySelector('.du-bois-light-tree-checkbox')"
        _wait_still(page, box, f"the checkbox of column {name!r}")
        page.click(box, f"the checkbox of column {name!r}")
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
    ap.add_argument("--trials", metavar="ID", help="show the trials of the comparison whose awnn.comparison tag is ID "
                                                   "(docs/tracking.md's trial steps) instead of the comparison runs")
    a = ap.parse_args(argv)
    if not a.chromium:
        raise SystemExit("needs Chromium: apt-get install chromium")
    width, height = (int(v) for v in a.size.lower().split("x"))
    experiment_id, name = comparison_experiment(a.tracking_uri, a.experiment)
    if a.trials:
        with mlflow_ui(a.tracking_uri) as url, Chromium(a.chromium, width=width, height=height) as page:
            table = show_trials(page, url, experiment_id, a.trials,
                                matching=count_matching(a.tracking_uri, experiment_id, TRIAL_FILTER.format(comparison=a.trials)))
            tidy_for_screenshot(page)
            page.screenshot(a.output)
        print(f"{a.output}: {name}, the trials of {a.trials}: {table.matching or len(table.rows)}; in view:")
        for run_id in table.visible:
            row = table.rows[run_id]
            print(f"  {row.get('Run Name', run_id).splitlines()[-1]}: " + ", ".join(f"{c}={row.get(c)}" for c in TRIAL_COLUMNS))
        return 0
    with mlflow_ui(a.tracking_uri) as url, Chromium(a.chromium, width=width, height=height) as page:
        table = show_comparisons(page, url, experiment_id, hide=("Dataset", "Source", "Models"), sort_by=SORT_BY,
                                 matching=count_matching(a.tracking_uri, experiment_id, COMPARISON_FILTER))
        fit_columns(page)
        tidy_for_screenshot(page)
        page.screenshot(a.output)
    print(f"{a.output}: {name}, {table.matching or len(table.rows)}; " +
          "; ".join(f"{c}={row.get(c)}" for row in table.rows.values() for c in HEADLINE_COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
