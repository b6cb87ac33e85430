"""Commands of the REST server: serve, and the API keys it accepts (keys create / list / revoke)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from memstrata.cli.common import (
    HomeOption,
    JsonOption,
    check_can_listen,
    console,
    error_console,
    print_json,
    shown,
    to_jsonable,
)
from memstrata.config import load_settings
from memstrata.errors import InvalidInput
from memstrata.memory import Memory
from memstrata.models import KeyRole
from memstrata.server.keys import (
    ClosableKeyStore,
    check_role,
    create_key,
    list_keys,
    open_key_store,
    revoke_key,
)

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")

keys_app = typer.Typer(
    help="API keys of the REST server: each belongs to a tenant and has a role; only a hash of the secret is stored.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.command()(serve)
    app.add_typer(keys_app, name="keys")


@contextmanager
def _key_store(home: HomeOption) -> Iterator[ClosableKeyStore]:
    settings = load_settings(home=home)
    store = open_key_store(settings.resolved_storage_url, settings)
    try:
        yield store
    finally:
        store.close()


def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on (default: server_host, 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default: server_port, 8420).")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level: critical, error, warning, info, debug.")] = "info",
    print_openapi: Annotated[
        bool, typer.Option("--print-openapi", help="Print the OpenAPI schema (docs/openapi.json) and exit.")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Run the REST server (FastAPI + uvicorn) over the memory in the data directory.

    Every request needs an API key from `memstrata keys create`, unless the setting
    server_allow_anonymous is true (local development: requests without a key act as tenant "local").

    Example: memstrata serve --host 127.0.0.1 --port 8420
    """
    from memstrata.server import require_server_dependencies

    if log_level.lower() not in LOG_LEVELS:
        raise InvalidInput(f"--log-level must be one of {', '.join(LOG_LEVELS)}, not {log_level!r}")
    require_server_dependencies()
    import uvicorn

    from memstrata.server.app import create_app, openapi_document

    settings = load_settings(home=home, server_host=host, server_port=port)
    if print_openapi:
        typer.echo(openapi_document(create_app(settings=settings)), nl=False)
        return
    check_can_listen(settings.server_host, settings.server_port)
    # Opened here, not in the app's lifespan, so a storage or configuration error is a
    # one-line message and its exit code rather than uvicorn's startup traceback. The app
    # closes it on shutdown, before uvicorn re-raises a SIGTERM.
    memory = Memory.from_settings(settings)
    try:
        if not settings.server_allow_anonymous:
            with _key_store(home) as store:
                if not any(key.is_active for key in list_keys(store)):
                    error_console.print(
                        "[yellow]warning:[/] no active API key, so every request will get 401; "
                        "create one with `memstrata keys create --tenant NAME`",
                        highlight=False,
                    )
        app = create_app(memory, settings=settings, close_memory=True)
        uvicorn.run(app, host=settings.server_host, port=settings.server_port, log_level=log_level.lower())
    finally:
        memory.close()


@keys_app.command("create")
def create(
    tenant: Annotated[str, typer.Option(help="The tenant the key acts for (letters, digits, '.', '_', '-').")],
    name: Annotated[str, typer.Option(help="A label, e.g. who or what uses the key.")] = "default",
    agent: Annotated[
        str | None,
        typer.Option(help="The agent the key acts as in shared spaces (default: the server_agent_id setting)."),
    ] = None,
    role: Annotated[
        str,
        typer.Option(
            help="What the key may do: read (search, context, list), write (also add, delete, chat, import)"
            " or admin (also forget, prune, spaces and grants); admin is what keys could do before roles."
        ),
    ] = KeyRole.ADMIN.value,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an API key for a tenant and print its secret, which is shown only this once.

    Example: memstrata keys create --tenant acme --name support-bot --agent support-bot --role write
    """
    allowed = check_role(role)  # before the store is opened: a bad role creates nothing
    with _key_store(home) as store:
        key, secret = create_key(store, tenant=tenant, name=name, agent_id=agent, role=allowed)
    if as_json:
        print_json(
            {
                "id": key.id,
                "tenant": key.tenant,
                "name": key.name,
                "agent_id": key.agent_id,
                "role": key.role.value,
                "created_at": key.created_at,
                "secret": secret,
            }
        )
        return
    acting = f", acting as agent {key.agent_id!r}" if key.agent_id is not None else ""
    console.print(
        Text.assemble(
            "created key ", (key.id, "bold"), f" for tenant {key.tenant!r} ({key.name}), role {key.role}{acting}"
        )
    )
    console.print(f"secret: {secret}", highlight=False, soft_wrap=True, markup=False)
    console.print("Store it now: only its hash is kept, so it cannot be shown again.", highlight=False)


@keys_app.command("list")
def list_(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List API keys (never their secrets), oldest first.

    Example: memstrata keys list --tenant acme --json
    """
    with _key_store(home) as store:
        keys = list_keys(store, tenant)
    if as_json:
        print_json([{**to_jsonable(key), "is_active": key.is_active} for key in keys])
        return
    table = Table("id", "tenant", "name", "role", "agent", "created", "revoked")
    for key in keys:
        revoked = f"{key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else ""
        agent = shown(key.agent_id) if key.agent_id is not None else ""
        created = f"{key.created_at:%Y-%m-%d %H:%M}"
        table.add_row(shown(key.id), shown(key.tenant), shown(key.name), key.role.value, agent, created, revoked)
    console.print(table if keys else "no API keys")


@keys_app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from `memstrata keys list`).")],
    home: HomeOption = None,
) -> None:
    """Revoke an API key at once: requests with it get 403 from then on.

    Example: memstrata keys revoke 01JB2Q8V6Z3N4M5K6J7H8G9F0E
    """
    with _key_store(home) as store:
        revoke_key(store, key_id)
    console.print(f"revoked key {key_id}", highlight=False, markup=False)
