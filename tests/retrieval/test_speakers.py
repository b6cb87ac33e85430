"""Speakers' names in a query: the one it names, and the query the embedder reads without them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.retrieval.speakers import aliases, mentioned_speaker, without_speakers


def test_a_named_speaker_is_found_as_a_whole_word_in_any_case() -> None:
    assert mentioned_speaker("What did caroline research?", ["Caroline", "Melanie"]) == "Caroline"
    assert mentioned_speaker("Who is Carolineish?", ["Caroline"]) is None
    assert mentioned_speaker("Did Caroline meet Melanie?", ["Caroline", "Melanie"]) is None
    assert mentioned_speaker("what about O'Brien (again)?", ["O'Brien"]) == "O'Brien"
    assert mentioned_speaker("anything", []) is None
    assert mentioned_speaker("a + b", ["+", " "]) is None


def test_a_name_that_is_also_a_word_counts_only_written_as_a_name() -> None:
    speakers = ["Will", "Ana"]
    assert mentioned_speaker("what will happen next?", speakers) is None
    assert mentioned_speaker("What will Ana cook?", speakers) == "Ana"  # "will" does not make it two
    assert mentioned_speaker("What did Will cook?", speakers) == "Will"
    assert mentioned_speaker("Will it rain?", ["Will"]) is None  # a first word is capitalised anyway


SPEAKERS = ["Caroline", "Melanie", "O'Brien", "Mary", "Mary Ann", "James", "J.R."]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("When did Caroline have a picnic?", "When did have a picnic?"),
        ("Did Caroline\u2019s sister meet Melanie?", "Did sister meet ?"),
        ("What did O'Brien say about Carolineish art?", "What did say about Carolineish art?"),
        ("Where does Mary Ann live?", "Where does live?"),  # the longer name first
        ("Is James' car fixed? And James's bike?", "Is car fixed? And bike?"),
        ("Did J.R. call?", "Did call?"),
        ("Did JxR call?", "Did JxR call?"),  # the dot is a dot, not any character
        ("Who is Ana-Caroline?", "Who is Ana-Caroline?"),  # part of a longer name
        ("what is caroline's hobby?", "what is hobby?"),  # an all lower-case query: any case
        ("What is caroline's hobby?", "What is caroline's hobby?"),  # otherwise: as written
        ("When did Bob leave?", "When did Bob leave?"),
        ("Caroline, Melanie!", "Caroline, Melanie!"),  # nothing would be left
        ("  When  did Bob\nleave? ", "  When  did Bob\nleave? "),  # nothing matched: untouched
    ],
)
def test_speakers_names_are_taken_out_of_the_dense_query(query: str, expected: str) -> None:
    assert without_speakers(query, SPEAKERS) == expected


def test_names_that_are_common_words_or_one_letter_stay() -> None:
    speakers = ["Will", "May", "user", "assistant", "A", "B", " Bob "]
    assert without_speakers("What will Will do in May for the user? Ask B, Bob.", speakers) == (
        "What will Will do in May for the user? Ask B, ."
    )
    assert without_speakers("When did Bob leave?", []) == "When did Bob leave?"
    assert without_speakers("a + b", ["+", " "]) == "a + b"


@given(
    st.lists(st.sampled_from(["Ana", "ana", "Ana's", "Bo", "Mel", "Melanie", "Melanies", "picnic", "when?", "x"])),
    st.lists(st.sampled_from(["Ana", "Bo", "Mel", "Melanie"]), max_size=3),
)
def test_the_dense_query_is_the_query_without_the_speakers_words(words: list[str], speakers: list[str]) -> None:
    query = " ".join(words)
    any_case = query == query.lower()
    names = {speaker.casefold() if any_case else speaker for speaker in speakers}
    kept = [
        word
        for word in words
        if (word.removesuffix("'s").casefold() if any_case else word.removesuffix("'s")) not in names
    ]
    expected = " ".join(kept) if kept and len(kept) < len(words) else query
    assert without_speakers(query, speakers) == expected


@pytest.mark.parametrize(
    ("query", "speakers", "expected"),
    [
        ("What did Caroline research?", ["Caro", "Melanie"], {"Caroline": "Caro"}),  # a clipped display name
        ("What did Melanie paint?", ["Caro", "Melanie Brown"], {"Melanie": "Melanie Brown"}),  # a full name
        ("Where did Brown go?", ["Caro", "Melanie Brown"], {"Brown": "Melanie Brown"}),
        ("what did mel paint?", ["Caro", "Melanie"], {"mel": "Melanie"}),  # a clip asked, lower case
        ("Is Caroline's dog ok?", ["Caro"], {"Caroline": "Caro"}),
        ("What did Melanie paint?", ["Melanie", "Mel"], {}),  # her own name: not an alias
        ("Who is Carolineish?", ["Caroline"], {}),  # a long stored name is not a clip
        ("What did Joan and John say?", ["Jo", "Joh"], {"John": "Joh"}),  # "Jo" is too short to clip
        ("Did Sammy call Samantha?", ["Sam", "Samantha"], {"Sammy": "Sam"}),
        ("what did caroline say?", ["Caro"], {"caroline": "Caro"}),
        ("What did caroline say? Ask Caroline.", ["Caro"], {"Caroline": "Caro"}),  # not all lower case
        ("What will Willow do?", ["Will"], {}),  # a common word is no name to clip
        ("What did Caroline research?", [], {}),
    ],
)
def test_a_speaker_called_by_another_form_of_the_name_is_found(
    query: str, speakers: list[str], expected: dict[str, str]
) -> None:
    assert aliases(query, speakers) == expected


def test_the_speaker_a_query_names_by_another_form_is_the_one_it_asks_about() -> None:
    assert mentioned_speaker("What did Caroline research?", ["Caro", "Mel"], by_alias=True) == "Caro"
    assert mentioned_speaker("What did Caroline research?", ["Caro", "Mel"]) is None  # only when asked to
    assert mentioned_speaker("Did Caroline meet Melanie?", ["Caro", "Mel"], by_alias=True) is None  # two
    assert mentioned_speaker("What did Mel paint?", ["Caro", "Mel"], by_alias=True) == "Mel"  # her own name first


def test_the_first_word_of_a_query_is_no_alias() -> None:
    assert aliases("Samsung phones: which one did Bo buy?", ["Sam", "Bo"]) == {}
    assert aliases("Which Samsung phone did Bo buy?", ["Sam", "Bo"]) == {"Samsung": "Sam"}  # a guess, so only lifts
