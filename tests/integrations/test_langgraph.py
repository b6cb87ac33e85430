"""MemstrataStore against LangGraph itself: its BaseStore methods, a compiled StateGraph, its async paths."""

from __future__ import annotations

import asyncio
import importlib
import sys
import tempfile
import threading
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, Op, PutOp, Result

from memstrata import Memory
from memstrata.errors import AccessDenied, InvalidInput, MissingDependency, StorageError
from memstrata.integrations.langgraph import MemstrataStore, item_id, text_of
from memstrata.integrations.langgraph_filters import check_filter, namespace_matches, value_matches
from tests.integrations.examples import DOCS, docs_example


@pytest.fixture
def store(memory: Memory) -> MemstrataStore:
    """A store over the test Memory (fake embedder, no background work)."""
    return MemstrataStore(memory)


def test_put_then_get_returns_the_value_exactly(store: MemstrataStore) -> None:
    value = {"text": "Ana is vegetarian", "tags": ["food", "ñ"], "nested": {"level": 2, "ok": True, "none": None}}
    store.put(("ana", "memories"), "diet", value)

    item = store.get(("ana", "memories"), "diet")
    assert item is not None
    assert item.value == value and item.key == "diet" and item.namespace == ("ana", "memories")
    assert item.created_at == item.updated_at and item.created_at.tzinfo is not None
    assert store.get(("ana", "memories"), "other") is None
    assert store.get(("ana", "elsewhere"), "diet") is None


def test_an_overwrite_replaces_value_and_text_but_keeps_created_at(store: MemstrataStore, memory: Memory) -> None:
    store.put(("ana", "memories"), "home", {"text": "Ana lives in Porto"})
    first = store.get(("ana", "memories"), "home")
    store.put(("ana", "memories"), "home", {"text": "Ana moved to Lisbon", "since": 2026})

    second = store.get(("ana", "memories"), "home")
    assert first is not None and second is not None
    assert second.value == {"text": "Ana moved to Lisbon", "since": 2026}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    turns = memory.history(user_id="ana")
    assert [turn.content for turn in turns] == ["Ana moved to Lisbon"]  # one turn per item, its text the new one
    assert [hit.key for hit in store.search(("ana",), query="Porto", filter={"since": 2026})] == ["home"]
    assert not any("Porto" in hit.value["text"] for hit in store.search(("ana",), query="Porto"))


def test_the_same_value_again_updates_its_metadata_too(store: MemstrataStore) -> None:
    # memstrata returns a stored turn for a retry of its text; the store must not keep the old value.
    store.put(("ana", "notes"), "n", {"text": "same words", "version": 1})
    store.put(("ana", "notes"), "n", {"text": "same words", "version": 2})
    item = store.get(("ana", "notes"), "n")
    assert item is not None and item.value["version"] == 2


def test_delete_removes_the_item_and_a_missing_one_is_fine(store: MemstrataStore, memory: Memory) -> None:
    store.put(("ana", "memories"), "k", {"text": "to forget"})
    store.delete(("ana", "memories"), "k")
    store.delete(("ana", "memories"), "k")
    store.delete(("nobody", "memories"), "k")
    assert store.get(("ana", "memories"), "k") is None
    assert memory.history(user_id="ana") == []


def test_search_ranks_by_meaning_and_words_within_the_prefix(store: MemstrataStore) -> None:
    store.put(("ana", "memories", "food"), "diet", {"text": "Ana is vegetarian and loves lentil soup", "kind": "diet"})
    store.put(("ana", "memories", "travel"), "trip", {"text": "Ana flies to Tokyo in May", "kind": "travel"})
    store.put(("ana", "todo"), "soup", {"text": "buy lentil soup ingredients", "kind": "todo"})

    hits = store.search(("ana", "memories"), query="lentil soup")
    assert [hit.key for hit in hits][:1] == ["diet"]
    assert all(hit.namespace[:2] == ("ana", "memories") for hit in hits)
    assert all(isinstance(hit.score, float) for hit in hits)
    assert hits[0].value == {"text": "Ana is vegetarian and loves lentil soup", "kind": "diet"}

    everything = store.search(("ana",), query="lentil soup", limit=10)
    assert {hit.key for hit in everything} == {"diet", "trip", "soup"}
    assert [hit.key for hit in store.search(("ana",), query="lentil soup", filter={"kind": "todo"})] == ["soup"]
    page = store.search(("ana",), query="lentil soup", limit=1, offset=1)
    assert [hit.key for hit in page] == [everything[1].key]


def test_search_without_a_query_filters_newest_first(store: MemstrataStore) -> None:
    for number in range(5):
        store.put(("ana", "scores"), f"k{number}", {"score": number, "meta": {"even": number % 2 == 0}})

    newest = store.search(("ana", "scores"))
    assert [hit.key for hit in newest] == ["k4", "k3", "k2", "k1", "k0"]
    assert all(hit.score is None for hit in newest)
    assert [hit.key for hit in store.search(("ana",), filter={"score": {"$gte": 3}})] == ["k4", "k3"]
    assert [hit.key for hit in store.search(("ana",), filter={"meta": {"even": True}}, limit=2)] == ["k4", "k2"]
    assert [hit.key for hit in store.search(("ana",), filter={"score": {"$ne": 0}}, offset=3)] == ["k1"]
    assert store.search(("ana",), limit=0) == []


def test_index_chooses_what_is_searchable(store: MemstrataStore) -> None:
    store.put(
        ("ana", "docs"),
        "paper",
        {"title": "Tidal energy in estuaries", "body": {"summary": "turbines"}},
        index=["title"],
    )
    store.put(("ana", "docs"), "secret", {"text": "estuaries private note"}, index=False)

    assert [hit.key for hit in store.search(("ana",), query="tidal estuaries")] == ["paper"]
    assert {hit.key for hit in store.search(("ana",))} == {"paper", "secret"}  # a filter search still lists it
    assert text_of({"title": "T", "text": "body"}, ["title"]) == "T"
    assert text_of({"n": 1}, None) == '{"n": 1}'
    assert text_of({"memory": "m", "content": " "}, ["missing"]) == "m"


def test_filters_and_namespace_conditions_read_as_langgraphs_own_stores() -> None:
    value = {"n": 3, "tags": ["a", "b"], "meta": {"kind": "note", "ok": True}, "flag": True}
    assert value_matches(value, {"n": 3, "tags": ["a", "b"], "meta": {"kind": "note"}})
    assert value_matches(value, {"n": {"$gt": 2, "$lte": 3}, "meta": {"kind": {"$ne": "todo"}}})
    assert not value_matches(value, {"tags": ["a"]})
    assert not value_matches(value, {"missing": {"$gt": 0}})
    assert not value_matches(value, {"flag": {"$gt": 0}})  # booleans are not numbers
    assert not value_matches(value, {"meta": {"kind": "todo"}})
    with pytest.raises(InvalidInput, match="not both"):
        check_filter({"n": {"$gt": 1, "other": 2}})
    with pytest.raises(InvalidInput, match="mapping"):
        check_filter(["n"])
    assert namespace_matches("prefix", ("a", "*"), ("a", "b", "c"))
    assert namespace_matches("suffix", ("*", "c"), ("a", "b", "c"))
    assert not namespace_matches("suffix", ("b",), ("a", "b", "c"))
    assert not namespace_matches("prefix", ("a", "b", "c", "d"), ("a", "b", "c"))


def test_list_namespaces_with_prefix_suffix_depth_and_pages(store: MemstrataStore) -> None:
    for namespace in [("ana", "a", "x"), ("ana", "a", "y"), ("ana", "b"), ("bob", "a", "x")]:
        store.put(namespace, "k", {"text": "/".join(namespace)})

    assert store.list_namespaces() == [("ana", "a", "x"), ("ana", "a", "y"), ("ana", "b"), ("bob", "a", "x")]
    assert store.list_namespaces(prefix=("ana",)) == [("ana", "a", "x"), ("ana", "a", "y"), ("ana", "b")]
    assert store.list_namespaces(prefix=("ana",), max_depth=2) == [("ana", "a"), ("ana", "b")]
    assert store.list_namespaces(suffix=("x",)) == [("ana", "a", "x"), ("bob", "a", "x")]
    assert store.list_namespaces(prefix=("*", "a"), suffix=("x",)) == [("ana", "a", "x"), ("bob", "a", "x")]
    assert store.list_namespaces(limit=2, offset=1) == [("ana", "a", "y"), ("ana", "b")]
    assert store.list_namespaces(prefix=("nobody",)) == []


def test_one_users_namespace_never_reads_anothers(store: MemstrataStore, memory: Memory) -> None:
    store.put(("ana", "memories"), "home", {"text": "I live in Lisbon"})
    store.put(("bob", "memories"), "home", {"text": "I live in Oslo"})

    ana, bob = store.get(("ana", "memories"), "home"), store.get(("bob", "memories"), "home")
    assert ana is not None and bob is not None and ana.value != bob.value
    assert item_id(("ana", "memories"), "home") != item_id(("bob", "memories"), "home")
    assert [hit.value["text"] for hit in store.search(("bob",), query="Lisbon")] == ["I live in Oslo"]
    store.delete(("bob", "memories"), "home")
    assert store.get(("ana", "memories"), "home") == ana
    assert [turn.user_id for turn in memory.history(user_id="ana")] == ["ana"]


def test_turns_the_store_did_not_write_are_not_items(store: MemstrataStore, memory: Memory) -> None:
    memory.add("a chat message", user_id="ana", metadata={"langgraph": {"note": "not an item"}})
    # A turn claiming another user's path, under another id, is ignored too.
    forged = {"namespace": ["bob", "x"], "key": "k", "value": {"text": "forged"}, "indexed": True}
    memory.add("forged", user_id="ana", id="forged-id", metadata={"langgraph": forged})
    store.put(("ana", "x"), "real", {"text": "a real item"})

    assert store.list_namespaces() == [("ana", "x")]
    assert [hit.key for hit in store.search(("ana",))] == ["real"]
    assert [hit.key for hit in store.search(("ana",), query="chat message forged item")] == ["real"]
    assert store.get(("bob", "x"), "k") is None


def test_memory_context_sees_what_the_graph_stored(store: MemstrataStore, memory: Memory) -> None:
    store.put(("ana", "memories"), "allergy", {"memory": "Ana is allergic to peanuts"})
    assert "allergic to peanuts" in memory.context("what is Ana allergic to?", user_id="ana").text


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ((), "must start with a user id"),
        (("ana", "a.b"), "cannot contain periods"),
        (("ana", ""), "cannot be empty"),
        (("langgraph", "x"), "cannot be"),
        (("\ufdd0ana", "x"), r"U\+FDD0"),
        (("x" * 300, "y"), "longer than 256"),
    ],
)
def test_a_bad_namespace_is_an_invalid_namespace_error(
    store: MemstrataStore, namespace: tuple[str, ...], message: str
) -> None:
    with pytest.raises(InvalidNamespaceError, match=message):
        store.batch([PutOp(namespace, "k", {"text": "t"})])
    assert issubclass(InvalidNamespaceError, ValueError)
    if namespace and namespace[0] != "langgraph":  # reading a bad namespace fails the same way
        with pytest.raises(InvalidNamespaceError, match=message):
            store.batch([GetOp(namespace, "k")])


def test_bad_values_are_refused_and_change_nothing(store: MemstrataStore, memory: Memory) -> None:
    store.put(("ana", "x"), "kept", {"text": "before"})
    bad_values: list[Any] = [{"when": datetime.now()}, {"n": float("nan")}, ["not", "a", "mapping"], {1: "int key"}]
    for bad in bad_values:
        with pytest.raises(ValueError):
            # The good put first: a batch is checked whole before any op runs.
            store.batch([PutOp(("ana", "x"), "new", {"text": "new"}), PutOp(("ana", "x"), "kept", bad)])
    with pytest.raises(InvalidInput, match="operator"):
        store.search(("ana",), filter={"n": {"$near": 1}})
    with pytest.raises(InvalidInput, match="offset"):
        store.search(("ana",), offset=-1)
    with pytest.raises(NotImplementedError, match="ttl"):
        store.put(("ana", "x"), "kept", {"text": "t"}, ttl=5)
    with pytest.raises(InvalidInput, match="max_text_bytes"):
        store.put(("ana", "x"), "kept", {"text": "x" * (memory.settings.max_text_bytes + 1)})

    for options in ({"mode": "semantic"}, {"fields": ["text", ""]}, {"space_prefix": " "}, {"agent_id": ""}):
        with pytest.raises(InvalidInput):
            MemstrataStore(memory, **options)

    item = store.get(("ana", "x"), "kept")
    assert item is not None and item.value == {"text": "before"}
    assert store.get(("ana", "x"), "new") is None


def test_a_failed_overwrite_puts_the_old_version_back(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemstrataStore(memory)
    store.put(("ana", "x"), "k", {"text": "old"})
    real_add = memory.add
    calls: list[str] = []

    def add_failing_first(*args: Any, **kwargs: Any) -> Any:
        # The store failing after the old version was deleted (a full disk, a dead connection ...).
        calls.append(kwargs["id"])
        if len(calls) == 1:
            raise StorageError("the store failed")
        return real_add(*args, **kwargs)

    monkeypatch.setattr(memory, "add", add_failing_first)
    with pytest.raises(StorageError, match="the store failed"):
        store.put(("ana", "x"), "k", {"text": "new"})
    monkeypatch.undo()
    item = store.get(("ana", "x"), "k")
    assert item is not None and item.value == {"text": "old"}
    assert len(calls) == 2


def test_spaces_are_named_by_a_prefix_and_keep_their_grants(memory: Memory) -> None:
    memory.create_space("apollo", agent_id="planner")
    planner = MemstrataStore(memory, agent_id="planner", space_prefix="space:")
    planner.put(("space:apollo", "plans"), "launch", {"text": "launch on March 3rd"})
    planner.put(("ana", "notes"), "n", {"text": "a note in Ana's own memory"})

    item = planner.get(("space:apollo", "plans"), "launch")
    assert item is not None and item.namespace == ("space:apollo", "plans")
    assert memory.history(space="apollo")[0].content == "launch on March 3rd"
    assert planner.list_namespaces() == [("ana", "notes"), ("space:apollo", "plans")]
    with pytest.raises(InvalidNamespaceError, match="create_space"):
        planner.put(("space:missing", "x"), "k", {"text": "t"})
    assert planner.get(("space:missing", "x"), "k") is None
    with pytest.raises(AccessDenied):
        MemstrataStore(memory, agent_id="stranger", space_prefix="space:").get(("space:apollo", "plans"), "launch")
    # Without the prefix the label is a user id like any other.
    assert MemstrataStore(memory).get(("space:apollo", "plans"), "launch") is None


class State(TypedDict):
    """The graph's state: who is talking and what the node answered."""

    user_id: str
    message: str
    answer: str


def remember_and_recall(state: State, runtime: Runtime[None]) -> dict[str, str]:
    """A node that recalls what the store holds about the message, then stores the message."""
    store = runtime.store
    assert store is not None
    namespace = (state["user_id"], "memories")
    recalled = [item.value["text"] for item in store.search(namespace, query=state["message"], limit=3)]
    store.put(namespace, f"m{len(store.search(namespace, limit=100))}", {"text": state["message"]})
    return {"answer": " | ".join(recalled) or "nothing yet"}


def test_a_compiled_state_graph_reads_and_writes_the_store(store: MemstrataStore) -> None:
    builder = StateGraph(State)
    builder.add_node("remember_and_recall", remember_and_recall)
    builder.add_edge(START, "remember_and_recall")
    builder.add_edge("remember_and_recall", END)
    graph = builder.compile(store=store)

    first = graph.invoke({"user_id": "ana", "message": "My cat is called Miso", "answer": ""})
    second = graph.invoke({"user_id": "ana", "message": "What is my cat called?", "answer": ""})
    other = graph.invoke({"user_id": "bob", "message": "What is my cat called?", "answer": ""})

    assert first["answer"] == "nothing yet"
    assert "Miso" in second["answer"]
    assert other["answer"] == "nothing yet"
    assert store.list_namespaces() == [("ana", "memories"), ("bob", "memories")]


async def recall_async(state: State, runtime: Runtime[None]) -> dict[str, str]:
    """The async node: the store's a-methods."""
    store = runtime.store
    assert store is not None
    namespace = (state["user_id"], "memories")
    await store.aput(namespace, "latest", {"text": state["message"]})
    hits = await store.asearch(namespace, query=state["message"])
    return {"answer": hits[0].value["text"]}


def test_the_async_paths_run_in_a_worker_thread(memory: Memory) -> None:
    threads: list[int] = []

    class RecordingStore(MemstrataStore):
        def batch(self, ops: Iterable[Op]) -> list[Result]:
            threads.append(threading.get_ident())
            return super().batch(ops)

    store = RecordingStore(memory)

    async def scenario() -> None:
        loop_thread = threading.get_ident()
        await store.aput(("ana", "a"), "k", {"text": "async value"})
        item = await store.aget(("ana", "a"), "k")
        assert item is not None and item.value == {"text": "async value"}
        assert [hit.key for hit in await store.asearch(("ana",), query="async")] == ["k"]
        assert await store.alist_namespaces(prefix=("ana",)) == [("ana", "a")]
        await store.adelete(("ana", "a"), "k")
        assert await store.aget(("ana", "a"), "k") is None
        with pytest.raises(InvalidNamespaceError):
            await store.aput(("ana", "bad.label"), "k", {"text": "t"})
        # Many writers at once, each in its own worker thread: every item lands once.
        await asyncio.gather(*(store.aput(("ana", "many"), f"k{n % 5}", {"text": f"value {n}"}) for n in range(20)))
        assert sorted(hit.key for hit in await store.asearch(("ana", "many"), limit=50)) == [f"k{n}" for n in range(5)]

        builder = StateGraph(State)
        builder.add_node("recall", recall_async)
        builder.add_edge(START, "recall")
        graph = builder.compile(store=store)
        result = await graph.ainvoke({"user_id": "ana", "message": "hello from a graph", "answer": ""})
        assert result["answer"] == "hello from a graph"
        assert threads and loop_thread not in threads

    asyncio.run(scenario())


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its Memory opens in a new temporary directory
    exec(compile(docs_example("LangGraph"), str(DOCS), "exec"), {})
    recalled, other, context = capsys.readouterr().out.split("\n", 2)
    assert recalled == "['My cat is called Miso']" and other == "[]"
    assert "user: My cat is called Miso" in context


def test_it_is_a_langgraph_store(store: MemstrataStore) -> None:
    assert isinstance(store, BaseStore)


def test_without_langgraph_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)  # what a missing package looks like to import
    monkeypatch.delitem(sys.modules, "memstrata.integrations.langgraph")
    with pytest.raises(MissingDependency, match=r"pip install 'memstrata\[langgraph\]'"):
        importlib.import_module("memstrata.integrations.langgraph")
