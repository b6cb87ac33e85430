"""Screenshots of the memory inspector for docs/inspector.md, taken over `memstrata demo`'s data.

    python scripts/inspector_screenshots.py [--out docs/images]

Runs the real commands in a temporary data directory: `memstrata demo --home DIR` (Ana's
two sessions), `memstrata consolidate --user ana`, then `memstrata ui --no-open`, and drives
the page it prints in headless Chromium (Selenium, through the system's chromedriver, so
nothing is downloaded). The demo runs with working_capacity=2 so its older exchanges reach
mid-term segments; with the default of ten they all stay in working memory and the segment
panel would be empty. Needs chromium, chromedriver, selenium and the server extra.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1280, 800
ADDRESS = re.compile(r"(http://127\.0\.0\.1:\d+/ui)#key=(msk_[A-Za-z0-9_-]+)")
SETTINGS = {"MEMSTRATA_WORKING_CAPACITY": "2"}


def main() -> None:
    """Make the demo's data, serve it with `memstrata ui` and save one PNG per screen."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memstrata-screens-") as directory:
        home = Path(directory) / "demo"
        memstrata("demo", "--home", str(home), home=home)
        memstrata("consolidate", "--user", "ana", home=home)
        with inspector(home) as address, browser() as driver:
            capture(driver, address, arguments.out)


def environment(home: Path) -> dict[str, str]:
    """This process's environment without the caller's memstrata settings, pointed at ``home``."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith("MEMSTRATA_")}
    return kept | SETTINGS | {"MEMSTRATA_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def memstrata(*arguments: str, home: Path) -> None:
    """Run one `memstrata` command to completion."""
    subprocess.run(
        [sys.executable, "-m", "memstrata", *arguments],
        env=environment(home),
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )


@contextmanager
def inspector(home: Path) -> Iterator[str]:
    """`memstrata ui --no-open` running over ``home``; yields the address it printed, secret included."""
    process = subprocess.Popen(
        [sys.executable, "-m", "memstrata", "ui", "--no-open"],
        env=environment(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        printed = ""
        deadline = time.monotonic() + 120
        while (found := ADDRESS.search(printed)) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"memstrata ui did not start:\n{printed}")
            printed += process.stdout.readline()
        yield f"{found.group(1)}#key={found.group(2)}"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


@contextmanager
def browser() -> Iterator[Any]:
    """Headless Chromium with a 1280×800 viewport."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))
    metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        yield driver
    finally:
        driver.quit()


def capture(driver: Any, address: str, out: Path) -> None:
    """Visit each screen with Ana's data and save it."""
    wait = WebDriverWait(driver, 15, ignored_exceptions=(StaleElementReferenceException,))

    def find(css: str) -> Any:
        return driver.find_element(By.CSS_SELECTOR, css)

    def until(condition: Callable[[], object]) -> None:
        wait.until(lambda _: condition())
        time.sleep(0.3)  # let the last paint land

    def save(name: str) -> None:
        png = driver.get_screenshot_as_png()
        (out / f"inspector-{name}.png").write_bytes(smaller(png))
        print(f"wrote {out / f'inspector-{name}.png'}")

    base = address.split("#", 1)[0]
    driver.get(base)
    until(lambda: find("#key-input").is_displayed())
    save("sign-in")

    driver.get(address)
    until(lambda: driver.find_elements(By.CSS_SELECTOR, '[data-user="ana"]'))
    find('[data-user="ana"]').click()
    until(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#turns .turn")) >= 10)
    save("timeline")

    find('.tabs [data-tab="tiers"]').click()
    until(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#tiers .tier")) == 6)
    save("tiers")
    find("#tiers [data-segment] button").click()
    until(lambda: driver.find_elements(By.CSS_SELECTOR, "#tiers .segment-turns li"))
    driver.execute_script("document.querySelector('[data-tier=\"mid-term\"]').scrollIntoView()")
    time.sleep(0.3)
    save("tiers-segments")
    driver.execute_script("window.scrollTo(0, 0)")

    find('.tabs [data-tab="graph"]').click()
    until(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#graph g.node")) >= 3)
    save("graph")

    find('.tabs [data-tab="search"]').click()
    find("#search-query").send_keys("Suggest a dessert recipe for Ana")
    limit = find("#search-limit")
    limit.clear()
    limit.send_keys("4")
    find("#search-form button").click()
    until(lambda: driver.find_elements(By.CSS_SELECTOR, "#hits tr.hit"))
    budget = find("#context-budget")
    budget.clear()
    budget.send_keys("120")
    find("#context-form button").click()
    until(lambda: find("#context-tokens").text)
    save("search")

    find('.tabs [data-tab="timeline"]').click()
    until(lambda: driver.find_elements(By.CSS_SELECTOR, "#turns .turn"))
    find("#forget-user").click()
    until(lambda: find("#confirm").get_attribute("open") is not None)
    find("#confirm-typed").send_keys("an")
    save("forget")
    find("#confirm-cancel").click()


def smaller(png: bytes) -> bytes:
    """The screenshot with a 256-colour palette when Pillow is there (a third of the size, looks the same)."""
    try:
        from PIL import Image
    except ImportError:
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


if __name__ == "__main__":
    main()
