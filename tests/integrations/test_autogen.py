"""The AutoGen memory, driven with AutoGen's own model contexts, messages and memory content."""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from autogen_core import CancellationToken, Image
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_core.model_context import BufferedChatCompletionContext, UnboundedChatCompletionContext
from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import AccessDenied, MissingDependency, StorageError
from memstrata.integrations.autogen import MIME_KEY, MemstrataMemory
from tests.integrations.examples import docs_example

#: A 1×1 PNG.
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def text(content: str, **metadata: Any) -> MemoryContent:
    return MemoryContent(content=content, mime_type=MemoryMimeType.TEXT, metadata=metadata or None)


def test_update_context_adds_memstratas_context_for_the_last_user_message(memory: Memory) -> None:
    ana = MemstrataMemory(memory, user_id="ana")
    asyncio.run(ana.add(text("I live in Lisbon")))
    asyncio.run(ana.add(text("My sister Marta plays the cello")))
    model_context = UnboundedChatCompletionContext(
        [
            UserMessage(content="What instrument does Marta play?", source="user"),
            AssistantMessage(content="The cello.", source="assistant"),
            UserMessage(content="Where do I live?", source="user"),
        ]
    )

    result = asyncio.run(ana.update_context(model_context))

    expected = memory.context("Where do I live?", user_id="ana")
    messages = asyncio.run(model_context.get_messages())
    assert len(messages) == 4 and messages[-1] == SystemMessage(content=expected.text)
    assert "Lisbon" in expected.text
    assert [item.content for item in result.memories.results] == [item.text for item in expected.items]
    assert [item.metadata["id"] for item in result.memories.results if item.metadata] == [
        item.id for item in expected.items
    ]


def test_a_buffered_context_is_queried_by_the_user_message_it_still_holds(memory: Memory) -> None:
    ana = MemstrataMemory(memory, user_id="ana")
    asyncio.run(ana.add(text("I live in Lisbon")))
    model_context = BufferedChatCompletionContext(buffer_size=2)
    messages: list[LLMMessage] = [
        UserMessage(content="Where do I live?", source="user"),
        AssistantMessage(content="Lisbon.", source="assistant"),
        UserMessage(content=["Is this my street?", Image.from_base64(PIXEL)], source="user"),
        AssistantMessage(content="Let me look.", source="assistant"),
    ]
    for message in messages:
        asyncio.run(model_context.add_message(message))

    asyncio.run(ana.update_context(model_context))

    added = asyncio.run(model_context.get_messages())[-1]
    assert added == SystemMessage(content=memory.context("Is this my street?", user_id="ana").text)


def test_no_user_text_or_nothing_remembered_leaves_the_context_alone(memory: Memory) -> None:
    ana = MemstrataMemory(memory, user_id="ana")
    empty = UnboundedChatCompletionContext()
    unknown = UnboundedChatCompletionContext([UserMessage(content="Where do I live?", source="user")])
    image_only = UnboundedChatCompletionContext([UserMessage(content=[Image.from_base64(PIXEL)], source="user")])

    for model_context in (empty, unknown, image_only):
        before = asyncio.run(model_context.get_messages())
        assert asyncio.run(ana.update_context(model_context)).memories.results == []
        assert asyncio.run(model_context.get_messages()) == before
    asyncio.run(ana.add(text("I live in Lisbon")))
    assert asyncio.run(ana.update_context(image_only)).memories.results == []


def test_text_markdown_and_json_come_back_as_they_were_added(memory: Memory) -> None:
    ana = MemstrataMemory(memory, user_id="ana", search_limit=10)
    asyncio.run(ana.add(text("Ana prefers formal language", channel="email")))
    asyncio.run(ana.add(MemoryContent(content="# Diet\n- *vegetarian*", mime_type=MemoryMimeType.MARKDOWN)))
    asyncio.run(ana.add(MemoryContent(content={"diet": "vegetarian", "since": 2019}, mime_type="application/json")))
    asyncio.run(ana.add(MemoryContent(content='{"allergy": "peanuts"}', mime_type=MemoryMimeType.JSON)))

    results = asyncio.run(ana.query("vegetarian diet formal language peanuts")).results

    found = {str(item.content): item for item in results}
    assert set(found) == {
        "Ana prefers formal language",
        "# Diet\n- *vegetarian*",
        str({"diet": "vegetarian", "since": 2019}),
        str({"allergy": "peanuts"}),
    }
    assert found["Ana prefers formal language"].mime_type == MemoryMimeType.TEXT
    assert found["# Diet\n- *vegetarian*"].mime_type == MemoryMimeType.MARKDOWN
    assert found[str({"allergy": "peanuts"})].mime_type == MemoryMimeType.JSON
    metadata = found["Ana prefers formal language"].metadata or {}
    assert metadata["channel"] == "email" and metadata["tier"] == "episodic" and metadata["score"] > 0
    assert all(MIME_KEY not in (item.metadata or {}) for item in results)
    scores = [(item.metadata or {})["score"] for item in results]
    assert scores == sorted(scores, reverse=True)


def test_query_takes_memory_content_and_a_limit(memory: Memory) -> None:
    ana = MemstrataMemory(memory, user_id="ana")
    for city in ("Lisbon", "Porto", "Faro", "Braga"):
        asyncio.run(ana.add(text(f"I have been to {city}")))

    assert len(asyncio.run(ana.query(text("Where have I been?"), limit=2)).results) == 2
    assert len(asyncio.run(ana.query("Where have I been?")).results) == 4
    with pytest.raises(TypeError, match="only limit"):
        asyncio.run(ana.query("Lisbon", k=3))
    with pytest.raises(ValueError):
        asyncio.run(ana.query("   "))
    with pytest.raises(ValueError):
        asyncio.run(ana.query("Lisbon", limit=0))


@pytest.mark.parametrize(
    "content",
    [
        MemoryContent(content=Image.from_base64(PIXEL), mime_type=MemoryMimeType.IMAGE),
        MemoryContent(content=b"\x00\x01", mime_type=MemoryMimeType.BINARY),
        MemoryContent(content="<p>hi</p>", mime_type="text/html"),
        MemoryContent(content=b"Lisbon", mime_type=MemoryMimeType.TEXT),
        MemoryContent(content="not json", mime_type=MemoryMimeType.JSON),
        MemoryContent(content={"when": object()}, mime_type=MemoryMimeType.JSON),
        MemoryContent(content="   ", mime_type=MemoryMimeType.TEXT),
        MemoryContent(content="Lisbon", mime_type=MemoryMimeType.TEXT, metadata={"bad": {1, 2}}),
    ],
    ids=["image", "binary", "html", "bytes-as-text", "bad-json", "unserialisable-json", "blank", "bad-metadata"],
)
def test_content_memstrata_cannot_store_is_refused_with_a_value_error(memory: Memory, content: MemoryContent) -> None:
    ana = MemstrataMemory(memory, user_id="ana")

    with pytest.raises(ValueError):
        asyncio.run(ana.add(content))

    assert memory.history(user_id="ana") == []


def test_add_wants_memory_content(memory: Memory) -> None:
    with pytest.raises(TypeError, match="MemoryContent"):
        asyncio.run(MemstrataMemory(memory, user_id="ana").add("I live in Lisbon"))  # type: ignore[arg-type]


def test_users_never_see_or_clear_each_others_memories(memory: Memory) -> None:
    ana = MemstrataMemory(memory, user_id="ana")
    bob = MemstrataMemory(memory, user_id="bob")
    asyncio.run(ana.add(text("I live in Lisbon")))
    asyncio.run(bob.add(text("I live in Oslo")))

    assert [item.content for item in asyncio.run(bob.query("Where do I live? Lisbon")).results] == ["I live in Oslo"]
    bobs_context = UnboundedChatCompletionContext([UserMessage(content="Lisbon?", source="user")])
    asyncio.run(bob.update_context(bobs_context))
    added = asyncio.run(bobs_context.get_messages())[-1]
    assert isinstance(added, SystemMessage) and "Oslo" in added.content and "Lisbon" not in added.content

    asyncio.run(ana.clear())

    assert asyncio.run(ana.query("Where do I live?")).results == []
    assert [turn.content for turn in memory.history(user_id="bob")] == ["I live in Oslo"]


def test_clear_forgets_only_the_scope_the_memory_names(memory: Memory) -> None:
    memory.add("I live in Lisbon", user_id="ana", session_id="monday")
    this_session = MemstrataMemory(memory, user_id="ana", session_id="tuesday")
    planner = MemstrataMemory(memory, user_id="ana", agent_id="planner")
    asyncio.run(this_session.add(text("Book a table for Friday")))
    asyncio.run(planner.add(text("The trip to Porto is in May")))

    asyncio.run(this_session.clear())
    assert [turn.content for turn in memory.history(user_id="ana")] == [
        "I live in Lisbon",
        "The trip to Porto is in May",
    ]
    asyncio.run(planner.clear())
    assert [turn.content for turn in memory.history(user_id="ana")] == ["I live in Lisbon"]


def test_an_agent_scoped_memory_reads_and_writes_as_that_agent(memory: Memory) -> None:
    memory.add("I live in Lisbon", user_id="ana")
    planner = MemstrataMemory(memory, user_id="ana", agent_id="planner", session_id="s1")

    asyncio.run(planner.add(text("The trip to Lisbon is in May")))

    assert [item.content for item in asyncio.run(planner.query("Lisbon")).results] == ["The trip to Lisbon is in May"]
    (stored,) = [turn for turn in memory.history(user_id="ana") if turn.agent_id == "planner"]
    assert stored.session_id == "s1" and stored.role == "user"


def test_a_space_memory_needs_the_agents_grant(memory: Memory) -> None:
    memory.create_space("team", agent_id="planner")
    memory.grant("team", "coder", "write", by="planner")
    coder = MemstrataMemory(memory, space="team", agent_id="coder")
    stranger = MemstrataMemory(memory, space="team", agent_id="stranger")

    asyncio.run(coder.add(text("The release is on March 3rd")))

    (found,) = asyncio.run(coder.query("release")).results
    assert found.content == "The release is on March 3rd" and (found.metadata or {})["space"] == "team"
    with pytest.raises(AccessDenied):
        asyncio.run(stranger.query("release"))
    with pytest.raises(PermissionError):
        asyncio.run(coder.clear())  # forgetting a whole space needs admin
    asyncio.run(MemstrataMemory(memory, space="team", agent_id="planner").clear())
    assert memory.history(space="team", agent_id="planner") == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"user_id": ""},
        {},
        {"user_id": "ana", "space": "team"},
        {"user_id": "ana", "agent_id": 7},
        {"user_id": "ana", "token_budget": 10},
        {"user_id": "ana", "search_limit": 0},
    ],
)
def test_bad_settings_are_refused_when_the_memory_is_made(memory: Memory, arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        MemstrataMemory(memory, **arguments)


def test_the_memory_must_be_a_memstrata_memory() -> None:
    with pytest.raises(TypeError, match="memstrata Memory"):
        MemstrataMemory("memory.db", user_id="ana")  # type: ignore[arg-type]


def test_a_cancelled_token_stops_the_call_before_it_starts(memory: Memory) -> None:
    ana = MemstrataMemory(memory, user_id="ana")
    token = CancellationToken()
    token.cancel()

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(ana.add(text("I live in Lisbon"), cancellation_token=token))
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(ana.query("Lisbon", cancellation_token=token))

    assert memory.history(user_id="ana") == []
    asyncio.run(ana.add(text("I live in Lisbon"), cancellation_token=CancellationToken()))
    assert len(asyncio.run(ana.query("Lisbon", cancellation_token=CancellationToken())).results) == 1


def test_close_leaves_a_memory_passed_in_open(memory: Memory) -> None:
    asyncio.run(MemstrataMemory(memory, user_id="ana").close())

    memory.add("still open", user_id="ana")


@pytest.mark.parametrize("database", [None, "agent.sqlite3"])
def test_the_component_config_reopens_the_same_memory(
    monkeypatch: pytest.MonkeyPatch, home: Path, database: str | None
) -> None:
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "hash")
    location = home if database is None else home / database
    with Memory(location, background=False) as opened:
        ana = MemstrataMemory(opened, user_id="ana", agent_id="planner", token_budget=300, search_limit=3)
        asyncio.run(ana.add(text("I live in Lisbon")))
        dumped = ana.dump_component()

    assert dumped.provider == "memstrata.integrations.autogen.MemstrataMemory"
    assert dumped.config == {
        "path": str((home / (database or "memstrata.db")).resolve()),
        "user_id": "ana",
        "agent_id": "planner",
        "token_budget": 300,
        "search_limit": 3,
    }
    loaded = MemstrataMemory.load_component(dumped)
    assert [item.content for item in asyncio.run(loaded.query("Lisbon")).results] == ["I live in Lisbon"]
    asyncio.run(loaded.close())
    with pytest.raises(StorageError, match="closed"):
        asyncio.run(loaded.query("Lisbon"))


def test_a_config_made_from_a_relative_encoded_url_opens_the_same_store_from_elsewhere(
    monkeypatch: pytest.MonkeyPatch, home: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "hash")
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(home)
    url = "sqlite:///agent%20memory.db"  # relative to the current directory, with a percent-encoded space
    with Memory(home, background=False, storage_url=url) as opened:
        ana = MemstrataMemory(opened, user_id="ana")
        asyncio.run(ana.add(text("I live in Lisbon")))
        dumped = ana.dump_component()
    assert dumped.config["path"] == str(home / "agent memory.db")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loaded = MemstrataMemory.load_component(dumped)
    assert [item.content for item in asyncio.run(loaded.query("Lisbon")).results] == ["I live in Lisbon"]
    asyncio.run(loaded.close())


class ThreadRecordingMemory(Memory):
    """A real Memory that notes which thread each call of the adapter ran on."""

    def __init__(self, home: Path) -> None:
        super().__init__(home, embedder=HashEmbedder(), background=False)
        self.threads: list[int] = []

    def add(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        return super().add(*args, **kwargs)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        return super().search(*args, **kwargs)

    def context(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        return super().context(*args, **kwargs)

    def forget(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        return super().forget(*args, **kwargs)


def test_memstrata_runs_off_the_event_loops_thread(home: Path) -> None:
    recording = ThreadRecordingMemory(home)
    with recording:
        ana = MemstrataMemory(recording, user_id="ana")

        async def use() -> int:
            await ana.add(text("I live in Lisbon"))
            await ana.query("Lisbon")
            await ana.update_context(UnboundedChatCompletionContext([UserMessage(content="Lisbon?", source="user")]))
            await ana.clear()
            return threading.get_ident()

        loop_thread = asyncio.run(use())

    assert len(recording.threads) == 4 and loop_thread not in recording.threads


def test_a_missing_autogen_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "autogen_core.memory", None)
    monkeypatch.delitem(sys.modules, "memstrata.integrations.autogen")

    with pytest.raises(MissingDependency, match=r"pip install 'memstrata\[autogen\]'"):
        importlib.import_module("memstrata.integrations.autogen")


def test_the_documented_example_runs_and_recalls(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(docs_example("AutoGen"), "AutoGen example", "exec"), {})

    printed = capsys.readouterr().out
    assert printed.startswith("# Memory\n") and "\nuser: Ana lives in Lisbon\n" in printed
    assert "'user: Ana lives in Lisbon'" in printed
    assert printed.splitlines()[-1].startswith("{'diet': 'vegetarian'} {'id': ")
