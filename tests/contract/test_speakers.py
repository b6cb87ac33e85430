"""``Store.speakers``, backend by backend, and the dense query it lets ``Memory.search`` read."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memstrata import Memory, Role, Turn
from memstrata.embeddings.base import Vectors
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.storage.base import TierStore

MODEL = "contract-model"


class RecordingEmbedder(HashEmbedder):
    """The hash embedder, keeping every query text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text: str) -> Vectors:
        self.queries.append(text)
        return super().embed_query(text)


def _turn(user: str, number: int, name: str | None, role: Role = Role.USER) -> Turn:
    return Turn(
        id=f"{user}#{number}",
        user_id=user,
        role=role,
        content=f"note {number}",
        created_at=datetime.now(UTC),
        name=name,
    )


def test_speakers_are_each_name_once_of_that_user_only(store: TierStore) -> None:
    names = ["Caroline", "Melanie", "Caroline", None, "Mel", "caroline", "Caroline", "Zoë"]
    store.insert_turns([_turn("ana", n, name) for n, name in enumerate(names)], None, MODEL)
    # Another user's names sort between ana's, and a tool turn's name is a function's.
    store.insert_turns(
        [_turn("anb", 0, "Dora"), _turn("anb", 1, "Lea"), _turn("ana", 99, "Mark", Role.TOOL)], None, MODEL
    )
    every = store.speakers("ana", 200)
    assert sorted(every) == sorted({"Caroline", "Melanie", "Mel", "caroline", "Zoë"})
    assert store.speakers("anb", 200) == ["Dora", "Lea"]
    assert store.speakers("nobody", 200) == []
    assert store.speakers("ana", 2) == every[:2]
    assert store.speakers("ana", 1) == every[:1]
    assert store.speakers("ana", 0) == []


def test_a_name_goes_with_its_last_turn(store: TierStore) -> None:
    store.insert_turns([_turn("ana", 0, "Caroline"), _turn("ana", 1, "Melanie")], None, MODEL)
    store.delete("ana#1", "ana")
    assert store.speakers("ana", 200) == ["Caroline"]


def test_the_embedder_reads_the_query_without_the_speakers_names(storage_url: str, tmp_path: Path) -> None:
    embedder = RecordingEmbedder()
    with Memory(tmp_path / "home", embedder=embedder, background=False, storage_url=storage_url) as memory:
        memory.add(
            [
                {"role": "user", "name": "Caroline", "content": "Thanks!"},
                {"role": "user", "name": "Caroline", "content": "Our picnic by the lake was lovely"},
                {"role": "assistant", "name": "Melanie", "content": "Hello again"},
            ],
            user_id="ana",
        )
        memory.add([{"role": "user", "name": "Bob", "content": "Caroline who?"}], user_id="bea")
        hits = memory.search("When did Caroline's picnic with Melanie happen?", user_id="ana", mode="vector")
        assert embedder.queries[-1] == "When did picnic with happen?"
        assert hits[0].content == "Our picnic by the lake was lovely"
        memory.search("When did Caroline have a picnic?", user_id="bea")  # not a speaker of bea's
        assert embedder.queries[-1] == "When did Caroline have a picnic?"
        memory.search("Caroline", user_id="ana", mode="hybrid")  # nothing else to read
        assert embedder.queries[-1] == "Caroline"
        asked = len(embedder.queries)
        memory.search("Caroline picnic", user_id="ana", mode="fulltext")
        assert len(embedder.queries) == asked
