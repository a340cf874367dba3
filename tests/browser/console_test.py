#!/usr/bin/python3
"""The web console in a real browser (headless Chromium driven by Selenium; Debian packages
chromium, chromium-driver, python3-selenium, installed by scripts/bootstrap).

Starts three grid-nodes with --http-port (the shared cluster) and the order-fulfillment
example's services, writes a map entry and places a poison order (a product missing from the
catalog: its reservation becomes a dead letter of the inventory group), then, in the console
of the first grid-node: sees the three members and its data directory, opens the map and finds the entry, sees the
consumer groups, opens the dead letters, adds the product and presses Replay, and sees the
dead letter leave (checked through the REST API too); then, in the console of the order
service's member, its sagas (one with its steps) and its outbox. Checks /metrics of both with
promtool. Saves a screenshot of each page in --shots (default: the build folder's
console-screenshots/). Exit 0 when every check holds, 1 otherwise.

Usage: tests/browser/console_test.py --bin-dir BUILD [--shots DIR] [--keep]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "order-fulfillment"))
from harness import Cluster, http, wait_for  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.common.exceptions import (  # noqa: E402
    NoSuchElementException, StaleElementReferenceException)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def api(base, path, method="GET", body=None):
    status, doc = http(method, f"{base}/api/v1{path}", body, timeout=30)
    return status, doc


def browser():
    opts = Options()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def rows(driver, table_id):
    """The text of each row of the table's body ([] while it is not there)."""
    try:
        body = driver.find_element(By.CSS_SELECTOR, f"#{table_id} tbody")
        return [r.text for r in body.find_elements(By.TAG_NAME, "tr")
                if "none" != r.text.strip()]
    except Exception:  # noqa: BLE001 - the page is redrawn every 2 s
        return []


def wait_rows(driver, table_id, pred, what, timeout=30):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        seen = rows(driver, table_id)
        if pred(seen):
            return seen
        time.sleep(0.2)
    check(False, f"{what} (table #{table_id} showed {seen})")
    return seen


def click(driver, css, timeout=20):
    """Clicks the element, again if the page redrew it meanwhile (every 2 s)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            WebDriverWait(driver, timeout).until(
                EC.element_to_be_clickable((By.CSS_SELECTOR, css))).click()
            return
        except StaleElementReferenceException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def wait_text(driver, css, pred, timeout=20):
    """The text of the element once pred(text) holds (read again if the page redrew it
    between finding and reading: every 2 s); the last text read after the timeout."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            text = driver.find_element(By.CSS_SELECTOR, css).text
            if pred(text):
                return text
        except (StaleElementReferenceException, NoSuchElementException):
            pass
        time.sleep(0.1)
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--shots")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    shots = args.shots or os.path.join(args.bin_dir, "console-screenshots")
    os.makedirs(shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tessera-console-test.")
    cluster = Cluster(args.bin_dir, work)
    driver = None
    try:
        nodes = cluster.start_shared(3, http=True)
        inventory = cluster.service("inventory", 1, ["--products", "p1=100"])
        cluster.service("payment", 1, [])
        # The reservation waits for the replay (a timeout would cancel the order meanwhile).
        order = cluster.service("order", 1, ["--reserve-timeout-ms", "300000",
                                             "--member-http-port", "0"])
        base = nodes[0].http
        check(all(n.http for n in nodes), "every grid-node serves HTTP")

        # A map entry written through another member's API, and a poison order.
        status, _ = api(nodes[1].http, "/maps/catalog/entries/sku-42", "PUT",
                        {"record": {"name": "lamp", "price": 1999}})
        check(status == 201, f"PUT an entry through grid-node-2's API (status {status})")
        poison = {"id": "console-poison-1", "customer": "c1",
                  "lines": [{"product": "rare-lamp", "quantity": 1, "price": 500}]}
        status, _ = http("POST", f"{order.http}/orders", poison, timeout=30)
        check(status == 201, f"the poison order was accepted (status {status})")

        def dead_letter():
            status, doc = api(base, "/dlq/inventory")
            return doc if status == 200 and doc["count"] >= 1 else None

        check(wait_for("dead letter", dead_letter, 60, interval=0.3) is not None,
              "the poison order's reservation is a dead letter of group inventory")

        driver = browser()
        driver.get(f"{base}/console")
        members = wait_rows(driver, "members", lambda r: len(r) == 3, "three members listed")
        check(len(members) == 3 and "master" in members[0],
              f"the overview lists 3 members, the first the master: {members}")
        # The harness gives every grid-node a data directory: the overview shows this one's.
        data_dir = cluster.data_dir("grid-node-1")
        shown = wait_text(driver, "#persistence", lambda t: data_dir in t and "none in progress" in t)
        check(data_dir in shown and "none in progress" in shown and "disk use of the map log" in shown,
              f"the overview shows the member's data directory and log: {shown!r}")
        driver.save_screenshot(os.path.join(shots, "cluster.png"))

        click(driver, 'nav a[data-page="maps"]')
        wait_rows(driver, "maps", lambda r: any(x.startswith("catalog") for x in r),
                  "map catalog listed")
        click(driver, 'a[data-map="catalog"]')
        entries = wait_rows(driver, "entries", lambda r: any("sku-42" in x for x in r),
                            "the entry written by the test shown")
        check(any("sku-42" in x and "lamp" in x for x in entries),
              f"the map page shows the entry sku-42 with its record: {entries}")
        driver.save_screenshot(os.path.join(shots, "maps.png"))

        click(driver, 'nav a[data-page="streams"]')
        groups = wait_rows(driver, "groups", lambda r: any(x.startswith("inventory") for x in r),
                           "consumer group inventory listed")
        check(any(x.startswith("inventory") for x in groups), "the streams page lists the groups")
        driver.save_screenshot(os.path.join(shots, "streams.png"))

        click(driver, 'nav a[data-page="dlq"]')
        click(driver, 'a[data-group="inventory"]')
        letters = wait_rows(driver, "dead-letters",
                            lambda r: any("console-poison-1" in x for x in r),
                            "the dead letter shown")
        check(any("console-poison-1" in x and "ReserveStock" in x for x in letters),
              f"the dead letters page shows the poison order's ReserveStock: {letters}")
        _, doc = api(base, "/dlq/inventory")
        event_id = doc["dead_letters"][0]["event_id_str"] if doc.get("dead_letters") else "?"
        check(any(x.startswith(event_id + " ") for x in letters),
              f"the page shows the event id {event_id} exactly (64-bit ids as text)")
        driver.save_screenshot(os.path.join(shots, "dead-letters.png"))

        # The fix, then the button.
        status, _ = http("PUT", f"{inventory.http}/stock/rare-lamp", {"available": 1}, timeout=30)
        check(status == 200, f"the product was added to the catalog (status {status})")
        click(driver, "button[data-replay]")
        wait_rows(driver, "dead-letters", lambda r: len(r) == 0, "the dead letter left the page")
        # The table may also be empty for a moment while the page redraws (every 2 s): the API
        # is what says the replay went through, within a bound.
        deadline = time.monotonic() + 30
        while True:
            status, doc = api(base, "/dlq/inventory")
            if (status == 200 and doc["count"] == 0) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        check(status == 200 and doc["count"] == 0,
              f"the API has no dead letter left in group inventory: {doc}")
        driver.save_screenshot(os.path.join(shots, "dead-letters-replayed.png"))

        def confirmed():
            s, body = http("GET", f"{order.http}/orders/console-poison-1", timeout=30)
            return body if s == 200 and body.get("status") == "confirmed" else None

        check(wait_for("order confirmed", confirmed, 60, interval=0.3) is not None,
              "the replayed order completes")

        # The order service's own member: its sagas, by status, and one saga's steps.
        check(order.member_http is not None, "the order service's member serves HTTP")
        driver.get(f"{order.member_http}/console")
        click(driver, 'nav a[data-page="sagas"]')
        sagas = wait_rows(driver, "sagas", lambda r: any("console-poison-1" in x for x in r),
                          "the order's saga listed")
        check(any("console-poison-1" in x and "COMPLETED" in x for x in sagas),
              f"the sagas page shows the order's saga COMPLETED: {sagas}")
        click(driver, 'a[data-saga="console-poison-1"]')
        steps = wait_rows(driver, "steps", lambda r: len(r) >= 2, "the saga's steps shown")
        check(len(steps) == 2 and steps[0].startswith("reserve") and steps[1].startswith("charge"),
              f"the saga's detail shows its steps reserve and charge: {steps}")
        driver.save_screenshot(os.path.join(shots, "sagas.png"))
        click(driver, 'nav a[data-page="outbox"]')
        WebDriverWait(driver, 20).until(EC.presence_of_element_located((By.ID, "outbox")))
        # The page redraws every 2 s: an element found just before a redraw is stale when read.
        heading = wait_text(driver, "section h2", lambda t: t.startswith("Outbox:"))
        check(heading.startswith("Outbox:"), f"the outbox page shows what is pending: {heading}")
        driver.save_screenshot(os.path.join(shots, "outbox.png"))

        # /metrics of a grid-node and of a service's member (the framework's families) are
        # valid for Prometheus.
        for name, url, families in [
                ("grid-node-1", nodes[0].http,
                 ["tessera_stream_lag_events", "tessera_map_entries", "tessera_cluster_members"]),
                ("the order service's member", order.member_http,
                 ["tessera_saga_started_total", "tessera_outbox_published_total",
                  "tessera_consumer_handled_total"])]:
            text = urllib.request.urlopen(f"{url}/metrics", timeout=30).read()
            r = subprocess.run(["/usr/bin/promtool", "check", "metrics"], input=text,
                               capture_output=True, timeout=60)
            check(r.returncode == 0, f"promtool check metrics passes on {name}'s /metrics "
                                     f"{(r.stdout + r.stderr).decode().strip()}")
            for family in families:
                check(f"# TYPE {family} ".encode() in text, f"{name}'s /metrics has {family}")
    except Exception as e:  # noqa: BLE001 - report, stop everything, fail
        check(False, f"the test stopped: {type(e).__name__}: {e}")
    finally:
        if driver is not None:
            driver.quit()
        for name, status in cluster.stop_all():
            check(False, f"{name} exited with status {status} when stopped")
    print(f"screenshots in {shots}")
    if failures or args.keep:
        print(f"logs in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
