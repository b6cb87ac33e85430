"""Rule-based named entities: typed examples, sentence openings, offsets and properties over arbitrary text."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.extraction.entities import Entity, EntityKind, entity_names, extract_entities

PERSON, PLACE = EntityKind.PERSON, EntityKind.PLACE
ORGANIZATION, OTHER = EntityKind.ORGANIZATION, EntityKind.OTHER


def found(text: str, known_people: tuple[str, ...] = ()) -> list[tuple[str, EntityKind]]:
    return [(entity.name, entity.kind) for entity in extract_entities(text, known_people=known_people)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to the University of Lisbon.", [("University of Lisbon", ORGANIZATION)]),
        ("She banks with Bank of America.", [("Bank of America", ORGANIZATION)]),
        ("He works at Acme Corp now.", [("Acme Corp", ORGANIZATION)]),
        ("I work for Tern and live in Porto.", [("Tern", ORGANIZATION), ("Porto", PLACE)]),
        ("We met in New York City last May.", [("New York City", PLACE)]),
        ("The lake trip to Lake Tahoe was fun.", [("Lake Tahoe", PLACE)]),
        ("We walked through Central Park.", [("Central Park", PLACE)]),
        ("A gift from my home country, Sweden.", [("Sweden", PLACE)]),
        ("I'm flying to Rio de Janeiro.", [("Rio de Janeiro", PLACE)]),
        ("I met Dr. Smith at St. Louis Park.", [("Smith", PERSON), ("St. Louis Park", PLACE)]),
        ("My sister Anna called.", [("Anna", PERSON)]),
        ("I went hiking with Priyanka.", [("Priyanka", PERSON)]),
        ("Kofi said the game was close.", [("Kofi", PERSON)]),
        ("Jean-Luc and I went out.", [("Jean-Luc", PERSON)]),
        ("I had lunch with O'Brien.", [("O'Brien", PERSON)]),
        ("Thanks, Mell!", [("Mell", PERSON)]),
        ("Totally agree, Sam.", [("Sam", PERSON)]),
        ("We adopted a dog named Biscuit.", [("Biscuit", OTHER)]),
        ("She opened a bakery called Crumbs.", [("Crumbs", ORGANIZATION)]),
        ('I loved "Becoming Nicole" by Amy Ellis Nutt.', [("Becoming Nicole", OTHER), ("Amy Ellis Nutt", PERSON)]),
        ("He signed with the Minnesota Wolves.", [("Minnesota Wolves", ORGANIZATION)]),
        ("Deals with Nike and Gatorade!", [("Nike", ORGANIZATION), ("Gatorade", ORGANIZATION)]),
        ("I've always liked Under Armour.", [("Under Armour", OTHER)]),
        ("I moved here from CA.", [("CA", PLACE)]),
        ("I joined an LGBTQ support group.", [("LGBTQ", OTHER)]),
    ],
)
def test_examples(text: str, expected: list[tuple[str, EntityKind]]) -> None:
    assert found(text) == expected


def test_possessives_are_stripped() -> None:
    assert found("Caroline's painting is great.", ("Caroline",)) == [("Caroline", PERSON)]
    assert found("I met Caroline's sister at Bank of America's office.") == [
        ("Caroline", PERSON),
        ("Bank of America", ORGANIZATION),
    ]


def test_known_people_and_their_nicknames_are_people() -> None:
    known = ("Caroline", "Melanie")
    assert found("Hey Mel! Good to see you, Caroline.", known) == [("Mel", PERSON), ("Caroline", PERSON)]
    assert found("Melanie, that's a great pic!", known) == [("Melanie", PERSON)]


@pytest.mark.parametrize(
    "text",
    [
        "Yesterday was fun. Painting is relaxing. Thanks for asking!",
        "Wow, that's cool. Hey, how have you been? Oh well. Lol.",
        "I think so. My plan is simple. The end.",
        "Monday and Tuesday in March are busy. Sounds great!",
        "Researching adoption agencies is hard. Gonna try anyway.",
        "Last week I went swimming. Sharing our stories helps.",
        "Mom and Dad say hi.",
    ],
)
def test_sentence_openings_and_common_words_are_not_entities(text: str) -> None:
    assert extract_entities(text) == []


def test_a_sentence_opening_name_is_kept_when_evidence_supports_it() -> None:
    assert found("Lisbon is lovely.") == [("Lisbon", PLACE)]
    assert found("Zanele said hi.") == [("Zanele", PERSON)]
    assert found("Quillon is great. I love Quillon.") == [("Quillon", OTHER), ("Quillon", OTHER)]


def test_a_name_used_as_a_modifier_is_not_a_person() -> None:
    assert found("I'm working on a Harry Potter fan project.") == [("Harry Potter", OTHER)]


def test_offsets_match_the_text() -> None:
    text = "Hey  Caroline!\nI moved from  Sweden to the University of  Lisbon. “Charlotte's Web” rocks."
    entities = extract_entities(text, known_people=["Caroline"])
    assert [entity.name for entity in entities] == [
        "Caroline",
        "Sweden",
        "University of Lisbon",
        "Charlotte's Web",
    ]
    for entity in entities:
        assert " ".join(text[entity.start : entity.end].split()) == entity.name


def test_entity_names_are_case_folded() -> None:
    assert entity_names("I flew from Porto to Berlin with Ana.") == {"porto", "berlin", "ana"}


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300), known=st.lists(st.text(max_size=12), max_size=3))
def test_never_raises_offsets_valid_and_no_overlaps(text: str, known: list[str]) -> None:
    entities = extract_entities(text, known_people=known)
    previous_end = 0
    for entity in entities:
        assert isinstance(entity, Entity)
        assert 0 <= previous_end <= entity.start < entity.end <= len(text)
        assert " ".join(text[entity.start : entity.end].split()) == entity.name
        previous_end = entity.end


WORDS = st.sampled_from(
    [
        "I",
        "went",
        "to",
        "the",
        "University",
        "of",
        "Lisbon",
        "Anna's",
        "and",
        "Bank",
        "America",
        "Hey",
        "Mel",
        ",",
        ".",
        "!",
        '"Big Fish"',
        "Dr.",
        "St.",
        "New",
        "York",
        "City",
        "with",
        "LGBTQ",
        "Jean-Luc",
        "said",
        "my",
        "sister",
    ]
)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(WORDS, max_size=25))
def test_name_like_text_gives_valid_non_overlapping_entities(words: list[str]) -> None:
    text = " ".join(words)
    entities = extract_entities(text, known_people=["Melanie"])
    assert entities == sorted(entities, key=lambda entity: entity.start)
    for left, right in itertools.pairwise(entities):
        assert left.end <= right.start
    for entity in entities:
        assert text[entity.start : entity.end].strip() == text[entity.start : entity.end]
        assert not entity.name.endswith("'s")
    assert extract_entities(text, known_people=["Melanie"]) == entities
