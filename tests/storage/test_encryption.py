"""Encryption at rest: SQLCipher stores hold no plaintext, refuse a wrong key untouched, and rekey both ways."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from memstrata import EncryptionKeyError, Memory, StorageError, rekey
from memstrata.config import load_settings
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import ConfigError
from memstrata.storage import open_store

try:
    import sqlcipher3  # noqa: F401
except ImportError:  # pragma: no cover - the test extras install it
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise
    pytest.skip("the encryption extra is not installed (make install-test installs it)", allow_module_level=True)

MARKER = "Zanzibarian marmalade"
KEY = "correct horse battery staple"


def _files(home: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(home.iterdir())}


def _holds_plaintext(home: Path) -> bool:
    return any(MARKER.encode() in path.read_bytes() for path in home.iterdir() if path.is_file())


def _remember(home: Path, **settings: object) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False, **settings) as memory:
        memory.add(
            [
                {"role": "user", "content": f"My grandmother's {MARKER} recipe uses bitter oranges."},
                {"role": "assistant", "content": "Bitter oranges, noted."},
            ],
            user_id="ana",
            session_id="s1",
        )
        memory.flush(user_id="ana")  # the derived tiers (cells, segments, graph, FTS) are written too


def _recalled(home: Path, **settings: object) -> list[str]:
    with Memory(home, embedder=HashEmbedder(), background=False, **settings) as memory:
        return [hit.content for hit in memory.search("marmalade recipe", user_id="ana")]


def test_an_encrypted_store_holds_no_plaintext_and_reopens_with_its_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _remember(home, encryption_key=KEY)
    assert not _holds_plaintext(home)  # the file, its write-ahead log and the FTS5 index
    assert any(MARKER in text for text in _recalled(home, encryption_key=KEY))


def test_the_control_an_unencrypted_store_does_hold_plaintext(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _remember(home)
    assert _holds_plaintext(home)  # so the scan above can find the marker when it is there


@pytest.mark.parametrize("key", ["wrong key", None])
def test_a_wrong_or_missing_key_is_refused_and_nothing_is_touched(tmp_path: Path, key: str | None) -> None:
    home = tmp_path / "home"
    _remember(home, encryption_key=KEY)
    before = _files(home)
    error = EncryptionKeyError if key else StorageError
    with pytest.raises(error, match="MEMSTRATA_ENCRYPTION_KEY"):
        Memory(home, embedder=HashEmbedder(), background=False, encryption_key=key)
    assert _files(home) == before


def test_a_key_given_for_an_unencrypted_store_is_refused_and_nothing_is_touched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _remember(home)
    before = _files(home)
    with pytest.raises(EncryptionKeyError, match="not encrypted"):
        Memory(home, embedder=HashEmbedder(), background=False, encryption_key=KEY)
    assert _files(home) == before


@pytest.mark.parametrize("key", ["", "   ", "a\x00b"])
def test_unusable_keys_are_config_errors(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError, match="MEMSTRATA_ENCRYPTION_KEY"):
        Memory(tmp_path / "home", embedder=HashEmbedder(), background=False, encryption_key=key)
    assert not (tmp_path / "home" / "memstrata.db").exists()


def test_postgresql_refuses_the_key_and_says_what_to_do() -> None:
    with pytest.raises(ConfigError, match="PostgreSQL, encrypt at the server"):
        open_store("postgresql://nobody@127.0.0.1:1/none", encryption_key=SecretStr(KEY))


def test_the_key_never_shows_in_settings(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path, encryption_key=KEY)
    assert KEY not in repr(settings) and KEY not in str(settings)


def test_driver_errors_keep_their_standard_kinds(tmp_path: Path) -> None:
    from memstrata.storage.sqlite import cipher

    connection = cipher.connect(str(tmp_path / "raw.db"), SecretStr(KEY), timeout=5)
    connection.execute("CREATE TABLE items (id TEXT PRIMARY KEY)")
    connection.execute("INSERT INTO items VALUES ('a')")
    with pytest.raises(sqlite3.IntegrityError):
        connection.execute("INSERT INTO items VALUES ('a')")
    with pytest.raises(sqlite3.OperationalError):
        connection.execute("SELECT nothing FROM nowhere")
    assert [row[0] for row in connection.execute("SELECT id FROM items")] == ["a"]
    connection.close()


def test_rekey_encrypts_changes_the_key_and_decrypts_keeping_every_memory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _remember(home)
    expected = _recalled(home)

    rekey(home, new_key=KEY)  # unencrypted → encrypted
    assert not _holds_plaintext(home)
    assert _recalled(home, encryption_key=KEY) == expected

    rekey(settings=load_settings(home=home, encryption_key=KEY), new_key="another passphrase")
    with pytest.raises(EncryptionKeyError):
        _recalled(home, encryption_key=KEY)
    assert _recalled(home, encryption_key="another passphrase") == expected

    rekey(settings=load_settings(home=home, encryption_key="another passphrase"), new_key=None)  # decrypt
    assert _recalled(home) == expected
    assert sorted(path.name for path in home.iterdir() if "rekey" in path.name) == []


def test_rekey_with_a_wrong_current_key_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _remember(home, encryption_key=KEY)
    before = _files(home)
    with pytest.raises(EncryptionKeyError, match="current key"):
        rekey(settings=load_settings(home=home, encryption_key="wrong"), new_key="new")
    assert _files(home) == before


def _cli(
    home: Path, *arguments: str, key: str | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MEMSTRATA_")}
    env.update({"MEMSTRATA_HOME": str(home), "MEMSTRATA_EMBEDDER": "hash", "COLUMNS": "200"})
    if key is not None:
        env["MEMSTRATA_ENCRYPTION_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "memstrata", *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_the_demo_round_trips_through_an_encrypted_store_and_a_wrong_key_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    demo = _cli(home, "demo", "--home", str(home), key=KEY)
    assert demo.returncode == 0, demo.stderr
    exported = tmp_path / "export.jsonl"
    run = _cli(home, "export", str(exported), "--user", "ana", key=KEY)
    assert run.returncode == 0, run.stderr
    text = exported.read_text(encoding="utf-8")
    assert "peanuts" in text and "Lisbon" in text  # the demo's facts, read back through the key
    assert not any(b"peanuts" in path.read_bytes() for path in home.iterdir() if path.is_file())

    before = _files(home)
    refused = _cli(home, "search", "peanuts", "--user", "ana", key="wrong")
    assert refused.returncode == 4 and "does not open" in refused.stderr
    assert _files(home) == before

    changed = _cli(home, "rekey", key=KEY, stdin="new passphrase\nnew passphrase\n")
    assert changed.returncode == 0, changed.stderr
    found = _cli(home, "search", "peanuts", "--user", "ana", "--json", key="new passphrase")
    assert found.returncode == 0 and "peanuts" in found.stdout


def test_rekey_keeps_the_store_s_permissions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _remember(home)
    (home / "memstrata.db").chmod(0o600)
    rekey(home, new_key=KEY)
    assert (home / "memstrata.db").stat().st_mode & 0o777 == 0o600


def test_a_raw_key_form_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="raw key"):
        Memory(tmp_path / "home", embedder=HashEmbedder(), background=False, encryption_key="x'" + "ab" * 32 + "'")


def test_the_key_cannot_sit_in_the_data_directory_s_config_file(tmp_path: Path) -> None:
    tmp_path.joinpath("memstrata.toml").write_text('[memstrata]\nencryption_key = "beside the store"\n')
    with pytest.raises(ConfigError, match="cannot be set in the data directory"):
        load_settings(home=tmp_path)


def test_cursors_translate_errors_too(tmp_path: Path) -> None:
    from memstrata.storage.sqlite import cipher

    connection = cipher.connect(str(tmp_path / "raw.db"), SecretStr(KEY), timeout=5)
    cursor = connection.cursor()
    with pytest.raises(sqlite3.OperationalError):
        cursor.execute("SELECT nothing FROM nowhere")
    assert next(cursor.execute("SELECT 1")) == (1,)
    connection.close()
