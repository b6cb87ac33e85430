"""`memstrata serve` and `memstrata keys …` as a user runs them: subprocesses, real exit codes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memstrata.bench.serve import free_port
from memstrata.cli.common import check_can_listen
from memstrata.errors import ConfigError
from tests.cli.test_cli import ok, run_cli

OPENAPI = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    home = tmp_path / "home"
    created = json.loads(ok(run_cli("keys", "create", "--tenant", "acme", "--name", "bot", "--json", home=home)))
    assert created["secret"].startswith("msk_")
    assert (created["tenant"], created["name"]) == ("acme", "bot")
    ok(run_cli("keys", "create", "--tenant", "globex", home=home))

    listed = json.loads(ok(run_cli("keys", "list", "--json", home=home)))
    assert [key["tenant"] for key in listed] == ["acme", "globex"]
    assert all("secret" not in key and key["is_active"] for key in listed)
    assert created["secret"] not in ok(run_cli("keys", "list", home=home))
    assert [key["id"] for key in json.loads(ok(run_cli("keys", "list", "--tenant", "acme", "--json", home=home)))] == [
        created["id"]
    ]

    ok(run_cli("keys", "revoke", created["id"], home=home))
    after = {key["id"]: key for key in json.loads(ok(run_cli("keys", "list", "--json", home=home)))}
    assert after[created["id"]]["is_active"] is False
    assert after[created["id"]]["revoked_at"]


def test_the_secret_is_printed_once(tmp_path: Path) -> None:
    output = ok(run_cli("keys", "create", "--tenant", "acme", home=tmp_path / "home"))
    assert "msk_" in output
    assert "only" in output


def test_a_key_can_act_as_an_agent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    command = ("keys", "create", "--tenant", "acme", "--name", "ops", "--agent", "deploy-bot")
    created = json.loads(ok(run_cli(*command, "--json", home=home)))
    assert created["agent_id"] == "deploy-bot"
    assert "acting as agent 'deploy-bot'" in ok(run_cli(*command, home=home))
    plain = json.loads(ok(run_cli("keys", "create", "--tenant", "acme", "--json", home=home)))
    assert plain["agent_id"] is None
    listed = json.loads(ok(run_cli("keys", "list", "--json", home=home)))
    assert [key["agent_id"] for key in listed] == ["deploy-bot", "deploy-bot", None]
    table = ok(run_cli("keys", "list", home=home))
    assert "agent" in table and "deploy-bot" in table
    blank = run_cli("keys", "create", "--tenant", "acme", "--agent", " ", home=home)
    assert blank.returncode == 2 and "agent_id" in blank.stderr


def test_a_key_has_a_role_admin_unless_told(tmp_path: Path) -> None:
    home = tmp_path / "home"
    reader = json.loads(ok(run_cli("keys", "create", "--tenant", "acme", "--role", "read", "--json", home=home)))
    assert reader["role"] == "read"
    assert "role write" in ok(
        run_cli("keys", "create", "--tenant", "acme", "--name", "bot", "--role", "write", home=home)
    )
    default = json.loads(ok(run_cli("keys", "create", "--tenant", "acme", "--json", home=home)))
    assert default["role"] == "admin"  # what every key could do before roles
    listed = json.loads(ok(run_cli("keys", "list", "--json", home=home)))
    assert [key["role"] for key in listed] == ["read", "write", "admin"]
    table = ok(run_cli("keys", "list", home=home))
    assert "role" in table and all(role in table for role in ("read", "write", "admin"))


@pytest.mark.parametrize("role", ["owner", "READ", ""])
def test_an_unknown_role_is_refused_and_makes_no_key(tmp_path: Path, role: str) -> None:
    home = tmp_path / "home"
    refused = run_cli("keys", "create", "--tenant", "acme", "--role", role, home=home)
    assert refused.returncode == 2
    assert f"role {role!r} is not valid: use one of read, write, admin" in refused.stderr
    assert json.loads(ok(run_cli("keys", "list", "--json", home=home))) == []


def test_key_errors_exit_with_their_codes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    bad_tenant = run_cli("keys", "create", "--tenant", "a/b", home=home)
    assert bad_tenant.returncode == 2
    assert "tenant" in bad_tenant.stderr
    unknown = run_cli("keys", "revoke", "no-such-key", home=home)
    assert unknown.returncode == 3
    assert "keys list" in unknown.stderr


def test_print_openapi_matches_the_checked_in_schema(tmp_path: Path) -> None:
    assert ok(run_cli("serve", "--print-openapi", home=tmp_path / "home")) == OPENAPI.read_text(encoding="utf-8")


def test_serve_without_the_extra_names_the_install_command(tmp_path: Path) -> None:
    fake = tmp_path / "fake-site" / "fastapi"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named fastapi', name='fastapi')\n")
    paths = [str(fake.parent), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    result = run_cli("serve", home=tmp_path / "home", env={"PYTHONPATH": os.pathsep.join(paths)})
    assert result.returncode == 4
    assert "pip install 'memstrata[server]'" in result.stderr


def test_serve_answers_and_stops_cleanly(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = free_port()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    environment |= {"MEMSTRATA_HOME": str(home), "MEMSTRATA_EMBEDDER": "hash"}
    server = subprocess.Popen(
        [sys.executable, "-m", "memstrata", "serve", "--port", str(port), "--log-level", "warning"],
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, server.communicate()
            time.sleep(0.05)
        assert httpx.get(f"{url}/v1/version").status_code == 401
        # A key created while the server runs works at once: keys are read from the store per request.
        secret = json.loads(ok(run_cli("keys", "create", "--tenant", "acme", "--json", home=home)))["secret"]
        headers = {"Authorization": f"Bearer {secret}"}
        added = httpx.post(f"{url}/v1/memories", json={"messages": "hello", "user_id": "ana"}, headers=headers)
        assert added.status_code == 201
        assert httpx.get(f"{url}/v1/version", headers=headers).json()["tenant"] == "acme"
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    # uvicorn shuts down cleanly, then re-raises the signal so supervisors see it.
    assert server.returncode in (0, -signal.SIGTERM), stderr
    assert "no active API key" in stderr
    assert "Traceback" not in stderr


def test_serve_on_a_port_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = run_cli("serve", "--port", str(port), home=tmp_path / "home")
    assert result.returncode == 4, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_port_check_tries_every_address_the_host_resolves_to(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        # A host that resolves to a free loopback address first and the taken one second.
        resolved = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ("127.0.0.2", "127.0.0.1")]
        monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: resolved)
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.2:{port}"):
            check_can_listen("127.0.0.2", port)


def test_serve_over_a_store_it_cannot_open_exits_with_the_storage_code(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("a file, not a directory")
    result = run_cli("serve", "--port", str(free_port()), home=home)
    assert result.returncode in (4, 5), result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 3, result.stderr
