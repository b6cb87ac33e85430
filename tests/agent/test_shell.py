"""ChatShell, the REPL's command layer: every command and message, driven line by line."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from memstrata import InvalidInput, Memory, ProviderError
from memstrata.agent.shell import COMMANDS, ChatShell
from tests.fakes import FakeLLM


class Answers:
    """Stands in for the confirmation prompt: answers from a list and records the questions."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.questions: list[str] = []

    def __call__(self, question: str) -> bool:
        self.questions.append(question)
        return self.answers.pop(0)


def _shell(memory: Memory, confirm: Answers | None = None, **options: object) -> tuple[ChatShell, io.StringIO]:
    output = io.StringIO()
    console = Console(file=output, width=200, color_system=None)
    shell = ChatShell(memory, console, user_id="ana", session_id="s1", confirm=confirm or Answers(), **options)  # type: ignore[arg-type]
    return shell, output


def _run(shell: ChatShell, output: io.StringIO, *lines: str) -> str:
    output.seek(0)
    output.truncate()
    for line in lines:
        shell.handle(line)
    return output.getvalue()


def test_greeting_without_an_llm_says_how_to_configure_one(memory: Memory) -> None:
    shell, output = _shell(memory)
    shell.greet()
    text = output.getvalue()
    assert "user ana, session s1" in text
    assert "No LLM is configured" in text and "MEMSTRATA_LLM_PROVIDER" in text


def test_greeting_with_an_llm_names_it(chatty: Memory) -> None:
    shell, output = _shell(chatty)
    shell.greet()
    assert "Replies by fake:scripted" in output.getvalue() and "No LLM" not in output.getvalue()


def test_a_message_without_an_llm_gets_an_extractive_reply(memory: Memory) -> None:
    shell, output = _shell(memory)
    _run(shell, output, "I keep my passport in the blue drawer.")
    text = _run(shell, output, "Where is my passport?")
    assert "memory> Here is what I remember:" in text and "blue drawer" in text and "no LLM" in text
    assert [turn.content for turn in memory.history(user_id="ana", session_id="s1")] == [
        "I keep my passport in the blue drawer.",
        "Where is my passport?",
    ]


def test_a_model_reply_is_printed_verbatim_with_its_costs(chatty: Memory, fake_llm: FakeLLM) -> None:
    fake_llm.script("[bold]not markup[/bold]", purpose="chat")
    shell, output = _shell(chatty)
    text = _run(shell, output, "Hello")
    assert "agent> [bold]not markup[/bold]" in text
    assert "0 in, 0 cached, 0 out; scripted" in text


def test_a_failing_model_is_reported_and_the_shell_goes_on(chatty: Memory, fake_llm: FakeLLM) -> None:
    fake_llm.script(ProviderError("the server timed out"), purpose="chat")
    shell, output = _shell(chatty)
    text = _run(shell, output, "Hello")
    assert "error: the server timed out (nothing was stored; send the message again)" in text
    assert shell.is_running and chatty.history(user_id="ana") == []


def test_memories_toggle_shows_what_each_reply_used(memory: Memory) -> None:
    memory.add("I keep my passport in the blue drawer.", user_id="ana", session_id="old")
    shell, output = _shell(memory)
    assert "memories used" not in _run(shell, output, "Where is my passport?")
    assert "showing the memories each reply used: on" in _run(shell, output, "/memories")
    text = _run(shell, output, "Where is my passport again?")
    assert "memories used" in text and "episode" in text
    assert "off" in _run(shell, output, "/memories")


def test_search(memory: Memory) -> None:
    shell, output = _shell(memory)
    assert "no memories matched" in _run(shell, output, "/search passport")
    memory.add("I keep my passport in the blue drawer.", user_id="ana", session_id="old")
    memory.add("I keep my passport in the red box.", user_id="bo", session_id="old")
    text = _run(shell, output, "/search passport")
    assert "blue drawer" in text and "red box" not in text and "old" in text
    assert "usage: /search <query>" in _run(shell, output, "/search")


def test_forget_asks_first_and_only_deletes_when_confirmed(memory: Memory) -> None:
    memory.add("I keep my passport in the blue drawer.", user_id="ana", session_id="old")
    memory.add("Hello from this session.", user_id="ana", session_id="s1")
    memory.add("I am Bo.", user_id="bo")
    answers = Answers(False, True, True)
    shell, output = _shell(memory, answers)
    assert "nothing deleted" in _run(shell, output, "/forget")
    assert len(memory.history(user_id="ana")) == 2
    assert "deleted 1 turns of session s1 of user ana" in _run(shell, output, "/forget session")
    assert [t.content for t in memory.history(user_id="ana")] == ["I keep my passport in the blue drawer."]
    assert "deleted 1 turns of user ana" in _run(shell, output, "/forget")
    assert memory.history(user_id="ana") == [] and len(memory.history(user_id="bo")) == 1
    assert answers.questions == [
        "Permanently delete every memory of user ana?",
        "Permanently delete every memory of session s1 of user ana?",
        "Permanently delete every memory of user ana?",
    ]
    assert "usage: /forget" in _run(shell, output, "/forget everything")


def test_profile_inspect_and_consolidate(memory: Memory) -> None:
    shell, output = _shell(memory)
    assert "no profile or facts yet" in _run(shell, output, "/profile")
    for text in ("I am allergic to peanuts.", "I live in Lisbon.", "I went hiking on Saturday.", "I went hiking."):
        memory.add(text, user_id="ana", session_id="s1")
    memory.flush()
    assert "current facts" in _run(shell, output, "/profile")
    text = _run(shell, output, "/inspect")
    assert "memory of ana" in text and "episodic" in text and "tier jobs pending: 0" in text
    assert "consolidations" in _run(shell, output, "/consolidate")


def test_profile_and_inspect_finish_this_users_queued_work_only(memory: Memory) -> None:
    shell, output = _shell(memory)
    memory.add("I live in Lisbon.", user_id="ana", session_id="s1")
    memory.add("I live in Oslo.", user_id="bob", session_id="s1")
    waiting = memory.parts.store.count_jobs("bob")
    assert "Lisbon" in _run(shell, output, "/profile")
    assert "memory of ana" in _run(shell, output, "/inspect")
    assert memory.parts.store.count_jobs("ana") == 0 and memory.parts.store.count_jobs("bob") == waiting > 0


def test_session_new_moves_later_messages_to_a_new_session(memory: Memory) -> None:
    shell, output = _shell(memory)
    assert "session s1" in _run(shell, output, "/session")
    text = _run(shell, output, "/session new")
    assert shell.session_id != "s1" and shell.session_id in text
    _run(shell, output, "Hello again")
    assert [turn.session_id for turn in memory.history(user_id="ana")] == [shell.session_id]
    assert "usage: /session new" in _run(shell, output, "/session old")


def test_help_lists_every_command_and_unknown_ones_point_to_it(memory: Memory) -> None:
    shell, output = _shell(memory)
    text = _run(shell, output, "/help")
    assert all(command in text for command in COMMANDS)
    assert "unknown command /dance; /help lists the commands" in _run(shell, output, "/dance")
    assert _run(shell, output, "", "   ") == "" and memory.history(user_id="ana") == []


@pytest.mark.parametrize("command", ["/quit", "/exit", "/QUIT"])
def test_quit_ends_the_session(memory: Memory, command: str) -> None:
    shell, _ = _shell(memory)
    assert shell.handle(command) is False and not shell.is_running


def test_bad_options_are_invalid_input(memory: Memory) -> None:
    with pytest.raises(InvalidInput):
        _shell(memory, token_budget=5)
    with pytest.raises(InvalidInput):
        ChatShell(memory, Console(file=io.StringIO()), user_id="")


def test_square_brackets_are_shown_as_text_not_markup(memory: Memory) -> None:
    memory.add("the config lives in [/etc] and [bold]", user_id="ana", session_id="[s1]")
    shell, output = _shell(memory)
    text = _run(shell, output, "/search where is [/etc] file")
    assert "search: where is [/etc] file" in text and "[/etc] and [bold]" in text and "[s1]" in text
