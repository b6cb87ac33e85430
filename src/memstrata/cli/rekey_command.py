"""``memstrata rekey``: encrypt the embedded store, change its key, or decrypt it."""

from __future__ import annotations

from typing import Annotated

import typer

from memstrata.cli.common import HomeOption, console
from memstrata.config import DATABASE_FILE_NAME, load_settings
from memstrata.errors import InvalidInput, NotFound


def register(app: typer.Typer) -> None:
    """Attach ``rekey`` to the root app."""
    app.command()(rekey)


def rekey(
    home: HomeOption = None,
    decrypt: Annotated[bool, typer.Option("--decrypt", help="Store it unencrypted instead.")] = False,
) -> None:
    """Re-encrypt the SQLite store under a new key typed twice (hidden); the current key is MEMSTRATA_ENCRYPTION_KEY.

    Without a current key it encrypts an unencrypted store. Stop every process using the store
    first. Afterwards set MEMSTRATA_ENCRYPTION_KEY to the new key (or unset it after --decrypt).

    Example: memstrata rekey --home ./agent-memory
    """
    from memstrata import rekey as rekey_store

    settings = load_settings(home=home)
    if settings.storage_url is None and not (settings.data_dir / DATABASE_FILE_NAME).is_file():
        raise NotFound(f"no memstrata store at {settings.data_dir}; check --home or MEMSTRATA_HOME")
    new_key = None
    if not decrypt:
        new_key = typer.prompt("new key", hide_input=True, confirmation_prompt=True)
        if not new_key.strip():
            raise InvalidInput("the new key is empty; type a passphrase, or use --decrypt to store it unencrypted")
    rekey_store(settings=settings, new_key=new_key)
    if new_key is None:
        console.print("the store is now unencrypted: unset MEMSTRATA_ENCRYPTION_KEY")
    else:
        console.print("the store is encrypted with the new key: set MEMSTRATA_ENCRYPTION_KEY to it from now on")
