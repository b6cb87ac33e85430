"""Abridged excerpts: grammar words left out, content, negations, names, quotes and time notes kept."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.retrieval.abridge import LEFT_OUT, abridge
from memstrata.retrieval.tokens import count_tokens


def test_grammar_words_go_and_what_was_said_stays() -> None:
    said = "Wow, I just signed up for a pottery class yesterday! It is like therapy for me."
    assert abridge(said) == "just signed up for pottery class yesterday! like therapy for."


def test_negations_numbers_and_modal_verbs_stay() -> None:
    assert abridge("I didn't know that. It's my first time, so I'm not sure.") == "didn't know. first time, not sure."
    assert abridge("We can never go there again with 3 kids") == "We can never go again with 3 kids"


def test_contractions_of_left_out_words_go_and_curly_apostrophes_count() -> None:
    assert abridge("I’m sure it’s fine and I’ve seen it") == "sure fine seen"
    assert abridge("You're right, that's what Ana's dog does") == "You're right, what Ana's dog"


def test_time_notes_and_quoted_titles_stay_whole() -> None:
    said = 'I watched "The Lord of the Rings" last night! [last night = 7 May 2023; a week = the week of 1 May 2023]'
    assert abridge(said) == (
        'watched "The Lord of the Rings" last night! [last night = 7 May 2023; a week = the week of 1 May 2023]'
    )


def test_a_word_inside_a_name_stays() -> None:
    assert abridge("I went to the Bank of America with Caroline and Melanie.") == (
        "went Bank of America with Caroline and Melanie."
    )
    # Across a clause mark, two capitalised words are not one name.
    assert abridge("Thanks, Mel. The kids and I loved it") == "Thanks, Mel. kids loved"


def test_brackets_stay_paired_and_closing_marks_move_to_the_word_before() -> None:
    assert abridge("[shared an image: a photo of a dog on the beach]") == "[shared image: photo dog on beach]"
    assert abridge("We loved (the view) and the food of it.") == "We loved (the view) food."
    assert abridge('Ask "why not?" and then "how"') == 'Ask "why not?" then "how"'


def test_a_text_of_only_left_out_words_is_kept_whole() -> None:
    assert abridge("Yeah, it is!") == "Yeah, it is!"
    assert abridge("") == ""


_WORDS = st.sampled_from([*sorted(LEFT_OUT), "Ana", "Porto", "hiking", "not", "3", "didn't", "I'm", "New", "York"])
_MARKS = st.sampled_from(["", "", ",", ".", "!", "?", ")", "'s"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_WORDS, _MARKS), max_size=30))
def test_abridging_never_adds_words_or_tokens(pieces: list[tuple[str, str]]) -> None:
    text = " ".join(word + mark for word, mark in pieces)
    short = abridge(text)
    assert count_tokens(short) <= count_tokens(text)
    kept = [piece.rstrip(".!?),'s") for piece in short.split()]
    assert all(word.rstrip(".!?),") in text for word in kept)
    if text.strip():
        assert short.strip()  # never empties a text
