"""``Store.speakers``, backend by backend, and the dense query it lets ``Memory.search`` read."""

from __future__ import annotations

from datetime import UTC, datetime

from memstrata import Memory, Role, Turn
from memstrata.storage.base import TierStore

MODEL = "contract-model"


def _turn(user: str, number: int, name: str | None) -> Turn:
    return Turn(
        id=f"{user}#{number}",
        user_id=user,
        role=Role.USER,
        content=f"note {number}",
        created_at=datetime.now(UTC),
        name=name,
    )


def test_speakers_are_each_name_once_of_that_user_only(store: TierStore) -> None:
    names = ["Caroline", "Melanie", "Caroline", None, "Mel", "caroline", "Caroline", "Zoë"]
    store.insert_turns([_turn("ana", n, name) for n, name in enumerate(names)], None, MODEL)
    store.insert_turns([_turn("bea", 0, "Bob")], None, MODEL)
    assert sorted(store.speakers("ana", 200)) == sorted({"Caroline", "Melanie", "Mel", "caroline", "Zoë"})
    assert store.speakers("bea", 200) == ["Bob"]
    assert store.speakers("nobody", 200) == []
    assert len(store.speakers("ana", 2)) == 2
    assert set(store.speakers("ana", 2)) <= {"Caroline", "Melanie", "Mel", "caroline", "Zoë"}


def test_a_name_goes_with_its_last_turn(store: TierStore) -> None:
    store.insert_turns([_turn("ana", 0, "Caroline"), _turn("ana", 1, "Melanie")], None, MODEL)
    store.delete("ana#1", "ana")
    assert store.speakers("ana", 200) == ["Caroline"]


def test_a_speakers_name_does_not_pull_their_small_talk_to_the_top(memory: Memory) -> None:
    memory.add(
        [
            {"role": "user", "name": "Caroline", "content": "Thanks!"},
            {"role": "user", "name": "Caroline", "content": "Our picnic by the lake was lovely"},
            {"role": "user", "name": "Melanie", "content": "Hello again"},
        ],
        user_id="ana",
    )
    # Embedded with the name, "Caroline: Thanks!" is nearer to the question than the picnic is.
    hits = memory.search("When did Caroline have a picnic?", user_id="ana", mode="vector")
    assert hits[0].content == "Our picnic by the lake was lovely"
    # A query of nothing but a name is searched as it is.
    assert {hit.content for hit in memory.search("Caroline", user_id="ana", mode="vector")} >= {"Thanks!"}
