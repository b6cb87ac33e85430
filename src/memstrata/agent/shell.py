"""The chat REPL's command layer: one line in, output on a console; the input loop lives in the CLI."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table
from rich.text import Text

from memstrata.errors import HOW_TO_CONFIGURE_LLM as HOW_TO_CONFIGURE
from memstrata.errors import InvalidInput, MemstrataError, ProviderError
from memstrata.memory import Memory
from memstrata.models import ChatReply
from memstrata.terminal import visible
from memstrata.validation import check_budget, check_identifier

#: Every command with its help line, in the order ``/help`` lists them.
COMMANDS: dict[str, str] = {
    "/inspect": "counts per tier, the working set, pending tier work",
    "/search <query>": "search this memory",
    "/profile": "the profile and current facts",
    "/consolidate": 'run "sleep" now and show the summaries it made',
    "/memories": "toggle showing the memories each reply used",
    "/session new": "start a new session (/session shows the current one)",
    "/forget": "delete every memory here, after asking (/forget session: only this session)",
    "/help": "this list",
    "/quit": "leave (also /exit or Ctrl-D)",
}
SEARCH_LIMIT = 5
SHOWN_CHARACTERS = 160


def new_session_id() -> str:
    """A fresh session id: today's date and a random suffix."""
    return f"chat-{datetime.now(UTC):%Y-%m-%d}-{secrets.token_hex(3)}"


class ChatShell:
    """Runs one REPL line at a time against a Memory: chat messages and ``/`` commands.

    It talks in one memory: a user's (``user_id``) or a shared space's (``space``, where
    ``agent_id`` is the agent acting, checked against its grant).
    """

    def __init__(
        self,
        memory: Memory,
        console: Console,
        *,
        user_id: str | None = None,
        space: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        token_budget: int = 1000,
        show_memories: bool = False,
        confirm: Callable[[str], bool] = lambda question: False,
    ) -> None:
        self.memory = memory
        self.console = console
        if (user_id is None) == (space is None):
            raise InvalidInput("name either user_id or space (exactly one)")
        self.user_id = check_identifier(user_id, "user_id", required=False)
        self.space = check_identifier(space, "space", required=False)
        self.agent_id = check_identifier(agent_id, "agent_id", required=False)
        self.session_id = str(check_identifier(session_id, "session_id", required=False) or new_session_id())
        self.token_budget = check_budget(token_budget)
        self.show_memories = show_memories
        self.is_running = True
        self._confirm = confirm
        self._commands: dict[str, Callable[[str], None]] = {
            "/inspect": self._inspect,
            "/search": self._search,
            "/profile": self._profile,
            "/consolidate": self._consolidate,
            "/memories": self._toggle_memories,
            "/session": self._session,
            "/forget": self._forget,
            "/help": self._help,
            "/quit": self._quit,
            "/exit": self._quit,
        }

    def greet(self) -> None:
        """Say who is chatting, in which session, what answers, and where the commands are."""
        acting = f" as agent {self.agent_id}" if self.agent_id else ""
        self._say(f"memstrata chat — {self._label}{acting}, session {self.session_id}. /help lists the commands.")
        llm = self.memory.llm
        if llm.is_available:
            self._say(f"Replies by {llm.name}, from memory.", style="dim")
        else:
            self._say(
                "No LLM is configured, so replies list what memory holds (extractive) instead of answering. "
                f"To chat with a model, {HOW_TO_CONFIGURE}.",
                style="yellow",
            )

    def handle(self, line: str) -> bool:
        """Run one line (a message or a command); False once the session should end."""
        text = line.strip()
        if not text:
            return self.is_running
        try:
            if text.startswith("/"):
                name, _, argument = text.partition(" ")
                command = self._commands.get(name.lower())
                if command is None:
                    self._say(f"unknown command {name}; /help lists the commands", style="yellow")
                else:
                    command(argument.strip())
            else:
                self._chat(text)
        except ProviderError as exc:
            self._error(f"{exc} (nothing was stored; send the message again)")
        except MemstrataError as exc:
            self._error(str(exc))
        return self.is_running

    # -- chatting ---------------------------------------------------------------------

    def _chat(self, text: str) -> None:
        reply = self.memory.chat(
            text,
            user_id=self.user_id,
            space=self.space,
            agent_id=self.agent_id,
            session_id=self.session_id,
            token_budget=self.token_budget,
        )
        label = Text("memory> " if reply.is_extractive else "agent> ", style="bold cyan")
        self.console.print(label + Text(visible(reply.answer)))
        self._say(_footer(reply), style="dim")
        for item in reply.consolidations:
            self._say(
                f'sleep: consolidated {len(item.source_turn_ids)} turns (TES {item.tes:.2f}): "{_short(item.summary)}"',
                style="dim",
            )
        if self.show_memories:
            self._print_memories(reply)

    def _print_memories(self, reply: ChatReply) -> None:
        if not reply.memories:
            self._say("no memories were used", style="dim")
            return
        table = Table("kind", "tier", "score", "memory", title="memories used", title_justify="left")
        for item in reply.memories:
            table.add_row(Text(item.kind), Text(item.tier), f"{item.score:.4f}", Text(visible(_short(item.text))))
        self.console.print(table)

    # -- commands ---------------------------------------------------------------------

    def _inspect(self, argument: str) -> None:
        # This memory's queued work done, as `memstrata inspect` does.
        self.memory.flush(user_id=self.user_id, space=self.space)
        report = self.memory.inspect(user_id=self.user_id, space=self.space, agent_id=self.agent_id, limit=5)
        named = self.user_id if self.space is None else self._label
        table = Table("tier", "items", title=Text(visible(f"memory of {named}")), title_justify="left")
        for name, count in report.counts.items():
            table.add_row(name, str(count))
        self.console.print(table)
        self._say(
            f"working set: {len(report.working)} turns · profile traits: {len(report.profile)} · "
            f"current facts shown: {len(report.cells)} · tier jobs pending: {report.pending_jobs}"
        )

    def _search(self, argument: str) -> None:
        if not argument:
            self._say("usage: /search <query>", style="yellow")
            return
        hits = self.memory.search(
            argument, user_id=self.user_id, space=self.space, agent_id=self.agent_id, limit=SEARCH_LIMIT
        )
        if not hits:
            self._say("no memories matched")
            return
        table = Table(
            "#", "score", "when", "session", "memory", title=Text(visible(f"search: {argument}")), title_justify="left"
        )
        for rank, hit in enumerate(hits, start=1):
            turn = hit.turn
            when = f"{turn.created_at:%Y-%m-%d %H:%M}" if turn else hit.tier
            speaker = f"{turn.name or turn.role.value}: " if turn else ""
            session = (turn.session_id or "") if turn else ""
            table.add_row(
                str(rank), f"{hit.score:.4f}", when, Text(visible(session)), Text(visible(speaker + hit.content))
            )
        self.console.print(table)

    def _profile(self, argument: str) -> None:
        self.memory.flush(user_id=self.user_id, space=self.space)
        profile = self.memory.profile(user_id=self.user_id, space=self.space, agent_id=self.agent_id)
        cells = self.memory.cells(user_id=self.user_id, space=self.space, agent_id=self.agent_id, limit=10)
        if not profile and not cells:
            self._say("no profile or facts yet")
            return
        if profile:
            table = Table("trait", "value", title="profile", title_justify="left")
            for key, value in profile.items():
                table.add_row(Text(visible(key)), Text(visible(value)))
            self.console.print(table)
        if cells:
            facts = Table("kind", "fact", "since", title="current facts", title_justify="left")
            for cell in cells:
                facts.add_row(cell.kind, Text(visible(cell.content)), f"{cell.valid_from:%Y-%m-%d}")
            self.console.print(facts)

    def _consolidate(self, argument: str) -> None:
        made = self.memory.consolidate(user_id=self.user_id, space=self.space, agent_id=self.agent_id)
        for item in made:
            self._say(f'{len(item.source_turn_ids)} turns → "{_short(item.summary)}" (TES {item.tes:.2f})')
        self._say(f"{len(made)} consolidations")

    def _toggle_memories(self, argument: str) -> None:
        self.show_memories = not self.show_memories
        self._say(f"showing the memories each reply used: {'on' if self.show_memories else 'off'}")

    def _session(self, argument: str) -> None:
        if argument == "new":
            self.session_id = new_session_id()
            self._say(f"new session {self.session_id}")
        elif argument:
            self._say("usage: /session new (or /session to show the current one)", style="yellow")
        else:
            self._say(f"session {self.session_id}")

    def _forget(self, argument: str) -> None:
        if argument not in ("", "session"):
            self._say("usage: /forget (everything here) or /forget session", style="yellow")
            return
        only_session = argument == "session"
        what = f"session {self.session_id} of {self._whose}" if only_session else self._whose
        if not self._confirm(f"Permanently delete every memory of {what}?"):
            self._say("nothing deleted")
            return
        deletion = self.memory.forget(
            user_id=self.user_id,
            space=self.space,
            agent_id=self.agent_id,
            session_id=self.session_id if only_session else None,
        )
        self._say(f"deleted {deletion.turns} turns of {what}")

    def _help(self, argument: str) -> None:
        table = Table("command", "what it does", show_header=False, box=None)
        for command, description in COMMANDS.items():
            table.add_row(command, description)
        self.console.print(table)
        self._say("Anything else is a message: the agent answers from memory and remembers the exchange.", style="dim")

    def _quit(self, argument: str) -> None:
        self.is_running = False

    # -- output -----------------------------------------------------------------------

    @property
    def _label(self) -> str:
        """``user ana`` or ``space apollo``."""
        return f"space {self.space}" if self.space is not None else f"user {self.user_id}"

    @property
    def _whose(self) -> str:
        """The memory ``/forget`` deletes: in a user's, an agent narrows it; in a space, it is who deletes."""
        narrowed = self.space is None and self.agent_id is not None
        return self._label + (f" agent {self.agent_id}" if narrowed else "")

    def _say(self, message: str, *, style: str | None = None) -> None:
        self.console.print(Text(message, style=style or ""))

    def _error(self, message: str) -> None:
        self.console.print(Text("error: ", style="bold red") + Text(visible(message)))


def _footer(reply: ChatReply) -> str:
    count = len(reply.memories)
    used = f"{count} {'memory' if count == 1 else 'memories'}, {reply.context_tokens} context tokens"
    if reply.is_extractive:
        return f"({used}; no LLM)"
    return f"({used}; {reply.tokens_in} in, {reply.tokens_cached} cached, {reply.tokens_out} out; {reply.model})"


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SHOWN_CHARACTERS else flat[: SHOWN_CHARACTERS - 1] + "…"
