"""The package around the server: it never shadows the SDK, and a missing SDK says what to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import memstrata.mcp
from memstrata.errors import MissingDependency


def test_memstrata_mcp_does_not_shadow_the_sdk() -> None:
    import mcp
    import mcp.server.mcpserver

    import memstrata.mcp.app

    assert mcp.__name__ == "mcp" and {"memstrata", "tests"}.isdisjoint(Path(mcp.__file__ or "").parts)
    assert memstrata.mcp.app.MCPServer is mcp.server.mcpserver.MCPServer
    assert memstrata.mcp.create_server is memstrata.mcp.app.create_server


def test_the_sdk_resolves_from_a_fresh_interpreter_after_our_package() -> None:
    code = "import memstrata.mcp.app, mcp, memstrata.mcp; print(mcp.__file__); print(memstrata.mcp.__file__)"
    sdk, ours = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert Path(sdk).parent.name == "mcp" and {"memstrata", "tests"}.isdisjoint(Path(sdk).parts)
    assert Path(ours).parent.parent.name == "memstrata"


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)
    with pytest.raises(MissingDependency, match=r"pip install 'memstrata\[mcp\]'"):
        memstrata.mcp.require_mcp_dependencies()
