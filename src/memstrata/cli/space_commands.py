"""Commands over shared spaces: ``memstrata space create|list|grant|revoke|grants|delete|trust|share``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from memstrata.cli.common import (
    AgentOption,
    HomeOption,
    JsonOption,
    check_before_opening,
    console,
    open_memory,
    print_json,
    print_turns,
    shown,
    to_jsonable,
    whose,
)
from memstrata.errors import IdConflict, InvalidInput
from memstrata.memory import Memory
from memstrata.models import Access
from memstrata.validation import check_identifier

SpaceArgument = Annotated[str, typer.Argument(metavar="SPACE", help="The space's name.", show_default=False)]
ByOption = Annotated[
    str | None,
    typer.Option("--by", help="The agent acting (it needs admin on the space; default: the application)."),
]

space_app = typer.Typer(
    help="Shared spaces: memories agents share, beside each user's, with per-agent access (read, write, admin).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Attach the ``space`` command group to the root app."""
    app.add_typer(space_app, name="space")


@space_app.command("create")
def create(
    space: SpaceArgument,
    description: Annotated[str | None, typer.Option(help="What the space is for.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="The agent creating it: it gets admin.")] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a shared space; the creating --agent gets admin on it.

    Example: memstrata space create apollo --agent planner --description "The Apollo project"
    """
    check_identifier(space, "space")
    check_before_opening(agent=agent)
    with open_memory(home, run_jobs=False) as memory:
        _refuse_taken(memory, space)
        made = memory.create_space(space, description=description, agent_id=agent)
    if as_json:
        print_json({**to_jsonable(made), "admin": agent})
        return
    admin = f" (admin: {agent})" if agent else "; no agent has access yet: grant some with `memstrata space grant`"
    console.print(Text.assemble("created space ", (made.name, "bold"), shown(admin)))


@space_app.command("list")
def list_(
    agent: Annotated[
        str | None, typer.Option("--agent", help="Only the spaces this agent may read, with its access.")
    ] = None,
    prefix: Annotated[str, typer.Option(help="Only names that start with this.")] = "",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the shared spaces (those --agent may read), by name.

    Example: memstrata space list --agent coder --json
    """
    check_before_opening(agent=agent)
    with open_memory(home, run_jobs=False) as memory:
        spaces = memory.spaces(agent_id=agent, prefix=prefix)
        # Read as the application: the agent may read each space, which is all `grants` needs.
        access = {
            space.name: next((grant.access for grant in memory.grants(space.name) if grant.agent_id == agent), None)
            for space in spaces
        }
    if as_json:
        listed = [to_jsonable(space) for space in spaces]
        print_json([{**item, "access": access[item["name"]]} for item in listed] if agent else listed)
        return
    table = Table("space", *(("access",) if agent else ()), "created", "description")
    for space in spaces:
        held = (str(access[space.name] or ""),) if agent else ()
        table.add_row(shown(space.name), *held, f"{space.created_at:%Y-%m-%d %H:%M}", shown(space.description or ""))
    console.print(table if spaces else "no spaces" + (f" that agent {agent!r} may read" if agent else ""))


@space_app.command("grant")
def grant(
    space: SpaceArgument,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent given access.", show_default=False)],
    access: Annotated[
        Access, typer.Argument(metavar="ACCESS", help="read, write (includes read) or admin (includes both).")
    ],
    by: ByOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give an agent read, write or admin access to a space, replacing what it had.

    Example: memstrata space grant apollo coder write --by planner
    """
    check_identifier(space, "space")
    check_before_opening(agent=agent)
    check_identifier(by, "by", required=False)
    with open_memory(home, run_jobs=False) as memory:
        given = memory.grant(space, agent, access, by=by)
    if as_json:
        print_json(given)
        return
    console.print(shown(f"agent {given.agent_id} has {given.access.value} access to space {given.space}"))


@space_app.command("revoke")
def revoke(
    space: SpaceArgument,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent whose access goes.", show_default=False)],
    by: ByOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Take an agent's access to a space away; its memories there stay.

    Example: memstrata space revoke apollo reviewer --by planner
    """
    check_identifier(space, "space")
    check_before_opening(agent=agent)
    check_identifier(by, "by", required=False)
    with open_memory(home, run_jobs=False) as memory:
        revoked = memory.revoke(space, agent, by=by)
    if as_json:
        print_json({"space": space, "agent_id": agent, "revoked": revoked})
        return
    if revoked:
        console.print(shown(f"revoked the access of agent {agent} to space {space}"))
    else:
        console.print(shown(f"agent {agent} had no access to space {space}; nothing changed"))


@space_app.command("grants")
def grants(
    space: SpaceArgument,
    agent: AgentOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show who may use a space: each agent and its access.

    Example: memstrata space grants apollo --json
    """
    check_identifier(space, "space")
    check_before_opening(agent=agent)
    with open_memory(home, run_jobs=False) as memory:
        held = memory.grants(space, agent_id=agent)
    if as_json:
        print_json(held)
        return
    table = Table("agent", "access", "since", title=shown(f"space {space}"))
    for item in held:
        table.add_row(shown(item.agent_id), item.access.value, f"{item.granted_at:%Y-%m-%d %H:%M}")
    console.print(table if held else shown(f"no agent has access to space {space}"))


@space_app.command("delete")
def delete(
    space: SpaceArgument,
    agent: Annotated[str | None, typer.Option("--agent", help="The agent deleting it (it needs admin).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Permanently delete a space: its grants and every memory in it (copies shared out of it stay).

    Example: memstrata space delete apollo --agent planner --yes
    """
    check_identifier(space, "space")
    check_before_opening(agent=agent)
    if not yes and not typer.confirm(f"Permanently delete space {space!r}, its grants and every memory in it?"):
        raise typer.Exit(1)
    with open_memory(home, run_jobs=False) as memory:
        deletion = memory.delete_space(space, agent_id=agent)
    if as_json:
        print_json(deletion)
    else:
        console.print(shown(f"deleted space {space} and its {deletion.turns} turns"))


@space_app.command("trust")
def trust(
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent reading.", show_default=False)],
    of_agent: Annotated[
        str | None, typer.Argument(metavar="[OF_AGENT]", help="The agent whose memories it weighs.")
    ] = None,
    weight: Annotated[
        float | None,
        typer.Argument(metavar="[WEIGHT]", help="0 to 1: how much its memories count in a ranking (default 1)."),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Set how much an agent trusts another's memories when it ranks shared ones (alone: show its weights).

    Example: memstrata space trust reviewer coder 0.2
    """
    check_before_opening(agent=agent)
    if (of_agent is None) != (weight is None):
        raise InvalidInput("give OF_AGENT and WEIGHT together (or neither, to show the weights AGENT set)")
    check_identifier(of_agent, "of_agent", required=False)
    with open_memory(home, run_jobs=False) as memory:
        if of_agent is not None and weight is not None:
            memory.set_trust(agent, of_agent, weight)
        weights = memory.trust(agent)
    if as_json:
        print_json({"agent_id": agent, "trust": weights})
        return
    if of_agent is not None:
        console.print(shown(f"agent {agent} now weighs what agent {of_agent} wrote at {weights[of_agent]:g}"))
        return
    table = Table("of agent", "weight", title=shown(f"trust of agent {agent}"), caption="agents not listed count 1")
    for writer, value in weights.items():
        table.add_row(shown(writer), f"{value:g}")
    console.print(table if weights else shown(f"agent {agent} trusts every agent fully (weight 1)"))


@space_app.command("share")
def share(
    ids: Annotated[
        list[str], typer.Argument(metavar="IDS...", help="The ids of the memories to share.", show_default=False)
    ],
    to: Annotated[str, typer.Option("--to", help="The space the copies go to.", show_default=False)],
    user: Annotated[str | None, typer.Option("--user", "-u", help="The user whose memories they are.")] = None,
    space: Annotated[str | None, typer.Option("--space", help="The space they are in (not with --user).")] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="The agent sharing: write access to --to (and read to --space) needed."),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Copy memories into a space, each linked to its source (never moved; sharing again is a no-op).

    Example: memstrata space share 01JB2Q8V6Z3N4M5K6J7H8G9F0E --to apollo --user ana --agent coder
    """
    source = whose(user, space)
    check_identifier(to, "--to")
    check_before_opening(agent=agent)
    with open_memory(home, run_jobs=False) as memory:
        copies = memory.share(ids, to_space=to, user_id=source.user, space=source.space, agent_id=agent)
    if as_json:
        print_json(copies)
        return
    count = f"{len(copies)} {'memory' if len(copies) == 1 else 'memories'}"
    print_turns(copies, title=shown(f"shared {count} of {source} into space {to!r}"))


def _refuse_taken(memory: Memory, name: str) -> None:
    """IdConflict when a space is called ``name`` already.

    Checked here, before ``create_space``: that erases what a space of that name holds before
    it finds the name taken, so a second ``create`` would wipe a live space (a core bug to fix
    there; this check still leaves a race between two creators).
    """
    if any(space.name == name for space in memory.spaces(prefix=name)):
        raise IdConflict(f"a space called {name!r} exists already; pick another name, or use it as it is")
