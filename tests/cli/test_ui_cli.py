"""`memstrata ui` as a user runs it: a subprocess serving the inspector over the data directory, never a browser."""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memstrata.config import DATABASE_FILE_NAME
from tests.cli.test_cli import ok, run_cli, seed

ADDRESS = re.compile(r"(http://127\.0\.0\.1:\d+)/ui#key=(msk_[A-Za-z0-9_-]+)")


def test_help_names_the_flags_and_the_example(tmp_path: Path) -> None:
    output = ok(run_cli("ui", "--help", home=tmp_path / "home"))
    assert "--no-open" in output and "--port" in output and "127.0.0.1" in output
    assert "memstrata ui --home" in output


def test_ui_serves_the_data_directory_to_the_secret_it_prints(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home, ["I live in Lisbon", "I like tea"])
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    environment |= {"MEMSTRATA_HOME": str(home), "MEMSTRATA_EMBEDDER": "hash", "PYTHONUNBUFFERED": "1"}
    # No BROWSER, and --no-open: a test never opens one.
    environment.pop("BROWSER", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "memstrata", "ui", "--no-open"],
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        printed = ""
        deadline = time.monotonic() + 60
        while (found := ADDRESS.search(printed)) is None:
            assert server.poll() is None and time.monotonic() < deadline, server.communicate()
            printed += server.stdout.readline()
        url, secret = found.groups()
        assert str(home.resolve()) in printed
        owner = {"Authorization": f"Bearer {secret}"}
        page = httpx.get(f"{url}/ui", timeout=30)
        assert page.status_code == 200 and "default-src 'self'" in page.headers["content-security-policy"]
        assert httpx.get(f"{url}/v1/users", headers=owner, timeout=30).json() == {"users": ["ana"]}
        history = httpx.get(f"{url}/v1/memories", params={"user_id": "ana"}, headers=owner, timeout=30).json()
        assert [turn["content"] for turn in history["memories"]] == ["I live in Lisbon", "I like tea"]
        assert httpx.get(f"{url}/v1/users", timeout=30).status_code == 401, "no keyless access"
        # The secret lives in the process only: nothing on disk holds it.
        assert secret.encode() not in (home / DATABASE_FILE_NAME).read_bytes()
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    assert server.returncode in (0, -signal.SIGTERM), stderr
    assert "Traceback" not in stderr


def test_ui_on_a_port_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = run_cli("ui", "--no-open", "--port", str(port), home=tmp_path / "home")
    assert result.returncode == 4, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr


def test_ui_refuses_an_unknown_log_level(tmp_path: Path) -> None:
    result = run_cli("ui", "--no-open", "--log-level", "loud", home=tmp_path / "home")
    assert result.returncode == 2 and "--log-level" in result.stderr


def test_the_browser_is_handed_a_private_file_not_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from memstrata.cli import ui_command

    opened: list[str] = []
    monkeypatch.setattr(ui_command.webbrowser, "open", opened.append)
    ui_command._open_privately("http://127.0.0.1:9/ui#key=msk_secret")
    (uri,) = opened
    assert "msk_secret" not in uri and uri.startswith("file://")
    page = Path(uri.removeprefix("file://"))
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert "http://127.0.0.1:9/ui#key=msk_secret" in page.read_text()
    page.unlink()
