"""Abridged excerpts: grammar words left out; content, negations, names, numbers, quotes and time notes kept."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.retrieval.abridge import LEFT_OUT, LONGEST_ABRIDGED_CHARS, abridge
from memstrata.retrieval.tokens import count_tokens


@pytest.mark.parametrize(
    ("said", "abridged"),
    [
        (
            "Wow, I just signed up for a pottery class yesterday! It is like therapy for me.",
            "just signed up for pottery class yesterday! like therapy for.",
        ),
        # Negations, numbers, verbs and modal verbs stay: "I'd" and "I'll" say would and will.
        ("I didn't know that. It's my first time, so I'm not sure.", "didn't know that. first time, not sure."),
        ("I'd never do that.", "I'd never do that."),
        ("I'll go to Paris next year with 3 kids.", "I'll go Paris next year with 3 kids."),
        # Capitalised inside a sentence, a listed word is something else: a grade, a field.
        ("I got an A on the test!", "got A on test!"),
        ("I work in IT now.", "work in IT now."),
        # Beside a number, "to", "of" and "and" carry it.
        ("We work 9 to 5, 3 to 4 days a week.", "We work 9 to 5, 3 to 4 days week."),
        ("It took 3 and a half years.", "took 3 and half years."),
        # "and I" keeps who did it; a clause ending on "be" keeps its verb; a sentence never empties.
        ('My mom and I went to "Hamilton".', 'mom and I went "Hamilton".'),
        ("That's who I am.", "who am."),
        ("Is it? No.", "Is it? No."),
        ("Yeah, it is!", "Yeah, it is!"),
        # The object a clause ends on stays after the word that takes it; a sentence is never left
        # with a question word or an auxiliary alone.
        ("I really appreciate it. Yeah, I get it!", "appreciate it. get it!"),
        ("I'd love to. I have been there.", "I'd love to. have been there."),
        ("How was it? Where is it? Yeah, I did!", "How was it? Where is it? Yeah, I did!"),
        ("I am so proud of it!", "proud!"),
    ],
)
def test_grammar_words_go_and_what_was_said_stays(said: str, abridged: str) -> None:
    assert abridge(said) == abridged


def test_contractions_and_curly_apostrophes() -> None:
    assert abridge("I’m sure it’s fine and I’ve seen it") == "sure fine seen"
    assert abridge("You're right, that's what Ana's dog does") == "You're right, what Ana's dog does"


def test_time_notes_and_quoted_titles_stay_whole_with_their_marks() -> None:
    said = 'I watched "The Lord of the Rings" last night! [last night = 7 May 2023; a week = the week of 1 May 2023]'
    assert abridge(said) == (
        'watched "The Lord of the Rings" last night! [last night = 7 May 2023; a week = the week of 1 May 2023]'
    )
    assert abridge("Was it “the one”?") == "“the one”?"


def test_a_word_inside_a_name_stays() -> None:
    assert abridge("I went to the Bank of America with Caroline and Melanie.") == (
        "went Bank of America with Caroline and Melanie."
    )
    # Across a clause mark, two capitalised words are not one name.
    assert abridge("Thanks, Mel. The kids and I loved it") == "Thanks, Mel. kids and I loved"
    # Nor when the clause mark is on a word that goes between them.
    assert abridge("I told Bob of it. Kids love it!") == "told Bob. Kids love it!"


def test_closing_marks_move_to_the_word_before_and_brackets_stay_paired() -> None:
    assert abridge("[shared an image: a photo of a dog on the beach]") == "[shared image: photo dog on beach]"
    assert abridge("We loved (the view) and the food of it.") == "We loved (the view) food."
    assert abridge("We went (with Ana (my sister) to the) beach.") == "We went (with Ana (my sister)) beach."
    assert abridge("Yes, it is.") == "Yes, is."
    assert abridge("Sure, so it is...") == "Sure, is..."


def test_odd_texts_come_back_as_they_were() -> None:
    for text in ("", "[", "...", 'the "unclosed quote', "the) thing"):
        assert abridge(text) == (text if text != 'the "unclosed quote' else '"unclosed quote')


def test_long_texts_take_linear_time_and_the_longest_come_back_whole() -> None:
    longest = "the " * (LONGEST_ABRIDGED_CHARS // 4)
    started = time.perf_counter()
    assert abridge(longest.strip()) == longest.strip()  # a sentence of nothing but listed words stays
    assert time.perf_counter() - started < 5  # quadratic, this took minutes
    assert abridge("the " + longest) == "the " + longest


_WORDS = st.sampled_from([*sorted(LEFT_OUT), "Ana", "Porto", "hiking", "not", "3", "didn't", "I'm", "New", "York"])
_MARKS = st.sampled_from(["", "", ",", ".", "!", "?", ")", "'s", '"', "]"])
_LEADS = st.sampled_from(["", "", "", "(", '"', "["])


def _content(text: str) -> list[str]:
    """The words of ``text`` that are not listed, in order (case-folded, marks stripped)."""
    words = [re.sub(r"^[^\w']+|[^\w']+$", "", piece).casefold() for piece in text.split()]
    return [word for word in words if word and word.split("'")[0] not in LEFT_OUT]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_LEADS, _WORDS, _MARKS), max_size=30))
def test_abridging_keeps_every_other_word_in_order_and_never_adds_tokens(pieces: list[tuple[str, str, str]]) -> None:
    text = " ".join(lead + word + mark for lead, word, mark in pieces)
    short = abridge(text)
    assert count_tokens(short) <= count_tokens(text)
    assert _content(short) == _content(text)
