"""The inspector in a real headless Chromium (Selenium) against the real server over a seeded Memory.

Without Chromium and its chromedriver the tests are skipped, or fail when ``CI`` is set: CI installs both.
Selenium is pointed at the system's chromedriver, so selenium-manager never downloads a browser.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server.conftest import Caller, LiveServer

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.server.app import create_app
from memstrata.server.keys import ClosableKeyStore, create_key, new_secret

CHROMIUM = "/usr/bin/chromium"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HOSTILE = "<img src=x onerror=\"document.title='pwned'\"> & <b>not bold</b>"
MONDAY = [
    ("user", "Hi! I'm Ana. I live in Lisbon and work at a robotics startup called Tern."),
    ("assistant", "Welcome, Ana!"),
    ("user", "I'm allergic to peanuts, so keep that in mind for recipes."),
    ("assistant", "Noted: no peanuts."),
    ("user", "My sister Marta is coming to visit Lisbon on April 12th."),
    ("assistant", "Lovely."),
]
THURSDAY = [
    ("user", "I moved to Porto last week, Tern opened an office there."),
    ("assistant", "Congratulations on the move to Porto!"),
    # Near-identical notes: the deterministic test embedder clusters them into one consolidation.
    ("user", "Standup notes: the Tern robot arm calibration is done."),
    ("user", "Standup notes: the Tern robot arm calibration is done again."),
    ("user", "Standup notes: the Tern robot arm calibration is done today."),
    ("user", HOSTILE),
    ("assistant", "That looks like markup; I will treat it as text."),
]


def _browser_or_skip() -> None:
    """Skip (fail under CI) when the browser, its driver or Selenium is missing."""
    missing = [
        what
        for what, ok in (("chromium", os.path.exists(CHROMIUM)), ("chromedriver", shutil.which("chromedriver")))
        if not ok
    ]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    if missing:
        message = f"the inspector's browser tests need {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium driven through the system's chromedriver."""
    _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


@pytest.fixture
def memory(home: Path) -> Iterator[Memory]:
    """A Memory whose working set holds two exchanges, so older ones reach mid-term segments."""
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=2) as opened:
        yield opened


@pytest.fixture
def seeded(live: LiveServer, acme: Caller, globex: Caller, memory: Memory) -> LiveServer:
    """acme's users ana (two sessions, consolidated) and bob; globex's zed, whom acme must never see."""
    with httpx.Client(base_url=live.url, timeout=30) as http:
        for minutes, session, messages in ((0, "monday", MONDAY), (3 * 24 * 60, "thursday", THURSDAY)):
            body = {
                "messages": [{"role": role, "content": content} for role, content in messages],
                "user_id": "ana",
                "session_id": session,
                "timestamp": (START + timedelta(minutes=minutes)).isoformat(),
            }
            assert http.post("/v1/memories", json=body, headers=acme.headers).status_code == 201
        assert http.post("/v1/memories", json={"messages": "bob was here", "user_id": "bob"}, headers=acme.headers)
        secret = {"messages": "GLOBEX-SECRET zed lives in Oslo", "user_id": "zed", "session_id": "g1"}
        assert http.post("/v1/memories", json=secret, headers=globex.headers).status_code == 201
        memory.flush()
        assert http.post("/v1/consolidate", json={"user_id": "ana"}, headers=acme.headers).status_code == 200
    return live


class Page:
    """The inspector as a user drives it."""

    def __init__(self, driver: Any, url: str) -> None:
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver = driver
        self.url = url
        self.by = By
        # The page redraws a list whole when its data arrives; an element read mid-redraw is read again.
        self.wait = WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,))

    def open(self, key: str) -> None:
        """Load the page in a fresh tab state and sign in with ``key``."""
        self.driver.get(self.url + "/ui")
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.get(self.url + "/ui")
        self.find("#key-input").send_keys(key)
        self.find("#key-form button").click()
        self.wait.until(lambda _: not self.find("#app").get_attribute("hidden"))

    def find(self, css: str) -> Any:
        return self.driver.find_element(self.by.CSS_SELECTOR, css)

    def all(self, css: str) -> list[Any]:
        return self.driver.find_elements(self.by.CSS_SELECTOR, css)

    def texts(self, css: str) -> list[str]:
        return [element.text for element in self.all(css)]

    def until(self, css: str, count: int = 1) -> list[Any]:
        """The elements ``css`` matches, once there are at least ``count``."""
        self.wait.until(lambda _: len(self.all(css)) >= count)
        return self.all(css)

    def turn_ids(self) -> list[str]:
        """The ids of the turns on the timeline, top to bottom."""
        found: list[str] = self.driver.execute_script(
            "return [...document.querySelectorAll('#turns .turn')].map((turn) => turn.dataset.id)"
        )
        return found

    def tab(self, name: str) -> None:
        self.find(f'.tabs [data-tab="{name}"]').click()

    def users(self) -> list[str]:
        self.until("#users li")
        return [element.get_attribute("data-user") for element in self.all("#users button")]


@pytest.fixture
def page(browser: Any, seeded: LiveServer) -> Page:
    """The inspector on the seeded server."""
    return Page(browser, seeded.url)


def test_a_key_opens_its_tenants_users_and_their_memories(page: Page, acme: Caller) -> None:
    page.open(acme.secret)
    assert "tenant acme" in page.find("#who").text
    assert page.users() == ["ana", "bob"]
    page.find('[data-user="ana"]').click()
    page.wait.until(
        lambda _: (
            page.texts("#sessions [data-session]")[1:]
            == ["thursday 7 turns · 2026-03-05 09:00 UTC", "monday 6 turns · 2026-03-02 09:00 UTC"]
        )
    )

    turns = page.until("#turns .turn", 10)
    assert turns[0].find_element(page.by.CSS_SELECTOR, ".content").text == THURSDAY[-1][1], "newest first"
    # Untrusted text is shown as text: no element made from it, no script run.
    assert HOSTILE in page.texts("#turns .content")
    assert not page.all("#turns img") and not page.all("#turns b")
    assert page.driver.title == "memstrata inspector"

    page.find('[data-session="monday"]').click()
    page.wait.until(lambda _: len(page.all("#turns .turn")) == 6)
    assert page.find("#page-info").text == "newest first · 1–6"


def test_the_tiers_graph_search_and_context(page: Page, acme: Caller) -> None:
    page.open(acme.secret)
    page.users()
    page.find('[data-user="ana"]').click()
    page.until("#turns .turn")

    page.tab("tiers")
    page.until("#tiers .tier", 6)
    cells = [(row.get_attribute("class"), row.text) for row in page.all("#tiers tr[data-cell]")]
    assert any(kind == "current" and text.startswith("user location Porto") for kind, text in cells), cells
    superseded = [text for kind, text in cells if kind == "superseded"]
    assert len(superseded) == 1 and superseded[0].startswith("user location Lisbon"), cells
    assert "until 2026-03-05 09:00 UTC" in superseded[0]
    assert page.all("#tiers .segments meter"), "mid-term segments with their heat"
    page.find("#tiers [data-segment] button").click()
    filed = page.until("#tiers [data-segment] .segment-turns li")
    assert all(turn.text.split(" ", 1)[0] in {"user", "assistant"} for turn in filed)
    assert "TES" in page.find('#tiers [data-tier="consolidations"]').text

    page.tab("graph")
    nodes = page.until("#graph g.node", 2)
    names = {node.get_attribute("data-name") for node in nodes}
    assert {"Lisbon", "Tern"} <= names, names
    assert page.all("#graph g.edge line")
    assert all(float(circle.get_attribute("cx")) > 0 for circle in page.all("#graph circle"))

    page.tab("search")
    page.find("#search-query").send_keys("peanuts recipes")
    page.find("#search-form button").click()
    hits = page.until("#hits tr.hit")
    assert "peanuts" in hits[0].text
    assert re.search(r"(fulltext|vector) #\d", hits[0].text)

    budget = page.find("#context-budget")
    budget.clear()
    budget.send_keys("120")
    page.find("#context-form button").click()
    page.wait.until(lambda _: page.find("#context-tokens").text)
    used, budget_shown = re.fullmatch(r"(\d+) / (\d+) tokens", page.find("#context-tokens").text).groups()
    assert budget_shown == "120" and 0 < int(used) <= 120
    assert "peanuts" in page.find("#context .context-text").text


def test_delete_and_forget_ask_first(page: Page, acme: Caller, seeded: LiveServer) -> None:
    page.open(acme.secret)
    page.users()
    page.find('[data-user="ana"]').click()
    page.until("#turns .turn", 10)
    doomed = page.turn_ids()[0]

    page.find("#turns .turn button.danger").click()
    page.wait.until(lambda _: page.find("#confirm").get_attribute("open") is not None)
    page.find("#confirm-cancel").click()
    page.wait.until(lambda _: page.find("#confirm").get_attribute("open") is None)
    assert doomed in page.turn_ids()

    page.find("#turns .turn button.danger").click()
    page.wait.until(lambda _: page.find("#confirm").get_attribute("open") is not None)
    page.find("#confirm-ok").click()
    page.wait.until(lambda _: page.turn_ids() and doomed not in page.turn_ids())
    with httpx.Client(base_url=seeded.url, headers=acme.headers, timeout=30) as http:
        assert http.get(f"/v1/memories/{doomed}", params={"user_id": "ana"}).status_code == 404

    page.find('[data-user="bob"]').click()
    page.until("#turns .turn")
    page.find("#forget-user").click()
    page.wait.until(lambda _: page.find("#confirm").get_attribute("open") is not None)
    assert not page.find("#confirm-ok").is_enabled(), "forgetting a user needs its id typed"
    page.find("#confirm-typed").send_keys("bob")
    page.find("#confirm-ok").click()
    page.wait.until(lambda _: "Forgot bob" in page.find("#user-title").text)
    assert page.users() == ["ana"]


def test_a_read_key_browses_and_is_told_why_it_may_not_delete(page: Page, keys: ClosableKeyStore) -> None:
    _, secret = create_key(keys, tenant="acme", name="dashboard", role="read")
    page.open(secret)
    page.users()
    page.find('[data-user="ana"]').click()
    page.until("#turns .turn", 10)
    kept = page.turn_ids()

    page.find("#turns .turn button.danger").click()
    page.wait.until(lambda _: page.find("#confirm").get_attribute("open") is not None)
    page.find("#confirm-ok").click()
    page.wait.until(lambda _: "has the read role" in page.find("#status").text)
    assert "needs the write role" in page.find("#status").text

    page.find("#forget-user").click()
    page.wait.until(lambda _: page.find("#confirm").get_attribute("open") is not None)
    page.find("#confirm-typed").send_keys("ana")
    page.find("#confirm-ok").click()
    page.wait.until(lambda _: "needs the admin role" in page.find("#status").text)
    assert page.find("#app").get_attribute("hidden") is None, "a refused call keeps the key signed in"
    assert page.turn_ids() == kept and page.users() == ["ana", "bob"]


def test_another_tenants_key_sees_none_of_it(page: Page, globex: Caller, acme: Caller) -> None:
    page.open(acme.secret)
    assert page.users() == ["ana", "bob"]
    page.find("#sign-out").click()
    page.wait.until(lambda _: not page.find("#login").get_attribute("hidden"))
    assert page.driver.execute_script("return sessionStorage.length") == 0
    assert not page.all("#users li") and not page.all("#turns li"), "nothing of the last key's stays in the page"

    page.open(globex.secret)
    assert "tenant globex" in page.find("#who").text
    assert page.users() == ["zed"]
    page.find('[data-user="zed"]').click()
    page.until("#turns .turn")
    body = page.find("body").text
    assert "GLOBEX-SECRET" in body and "Lisbon" not in body and "peanuts" not in body


def test_a_wrong_key_is_refused_with_the_servers_message(page: Page) -> None:
    page.driver.get(page.url + "/ui")
    page.driver.execute_script("sessionStorage.clear()")
    page.find("#key-input").send_keys("msk_not-a-key")
    page.find("#key-form button").click()
    page.wait.until(lambda _: page.find("#login-error").text)
    assert "unknown API key" in page.find("#login-error").text
    assert page.find("#app").get_attribute("hidden") is not None


def test_the_address_of_memstrata_ui_signs_in_and_drops_the_secret(
    browser: Any, memory: Memory, keys: ClosableKeyStore
) -> None:
    memory.add("stored by the library, as the demo does", user_id="ana", session_id="monday")
    secret = new_secret()
    with LiveServer(create_app(memory, keys=keys, owner_secret=secret)) as server:
        page = Page(browser, server.url)
        browser.get(server.url + "/ui")
        browser.execute_script("sessionStorage.clear()")
        browser.get(f"{server.url}/ui#key={secret}")
        page.wait.until(lambda _: not page.find("#app").get_attribute("hidden"))
        assert browser.current_url == server.url + "/ui", "the secret leaves the address bar and history"
        assert "whole data directory" in page.find("#who").text
        assert page.users() == ["ana"]
        page.find('[data-user="ana"]').click()
        page.wait.until(lambda _: page.texts("#turns .content") == ["stored by the library, as the demo does"])
