"""Procedural patterns: what one user message shows about how the user likes to be answered."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.extraction.patterns import PatternObservation, observe_patterns


def keys(text: str, **context: str) -> set[str]:
    return {observation.key for observation in observe_patterns(text, **context)}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Can you write a function that parses dates?", "asks_for_code"),
        ("Show me the code for a binary search.", "asks_for_code"),
        ("Give me a python snippet to read a CSV.", "asks_for_code"),
        ("Just give me the code, explain later.", "code_before_explanation"),
        ("Code first please, no explanation needed.", "code_before_explanation"),
        ("Could you give me an example?", "asks_for_examples"),
        ("Explain closures with some examples.", "asks_for_examples"),
        ("Answer in bullet points.", "prefers_bullets"),
        ("Can you put that as a numbered list?", "prefers_bullets"),
        ("Keep it short.", "prefers_brevity"),
        ("tl;dr please", "prefers_brevity"),
        ("Explain it in one sentence.", "prefers_brevity"),
        ("Can you go into more detail?", "prefers_detail"),
        ("Walk me through it step by step.", "asks_step_by_step"),
        ("Do you have any sources for that?", "asks_for_sources"),
        ("Please include links to the docs.", "asks_for_sources"),
        ("Can you cite your sources?", "asks_for_sources"),
        ("Nice! Any references I could read?", "asks_for_sources"),
        ("Where did you get that information?", "asks_for_sources"),
        ("Give me a quick recap.", "asks_for_summary"),
        ("Hi! How do I reverse a list?", "greets_first"),
        ("Good morning, quick question.", "greets_first"),
        ("Why does my loop never end?", "asks_for_explanation"),
        ("What's the difference between TCP and UDP?", "asks_for_comparison"),
        ("Python vs Rust for a CLI tool?", "asks_for_comparison"),
        ("Postgres versus MySQL for this workload?", "asks_for_comparison"),
        ("Python vs Go for game dev?", "asks_for_comparison"),
        ("Unity vs Godot game engine?", "asks_for_comparison"),
        ("Summarize this article.", "asks_for_summary"),
        ("Show it as a table.", "prefers_tables"),
        ("Translate this to French.", "asks_for_translation"),
        ("```\nprint('hi')\n```", "shares_code"),
        ("Traceback (most recent call last):\n  ValueError: bad", "shares_errors"),
        ("Thanks, that helped!", "says_thanks"),
        ("Could you please check this?", "says_please"),
    ],
)
def test_detectors(text: str, key: str) -> None:
    assert key in keys(text)


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        ("It is open source software.", "asks_for_sources"),
        ("Look at the source code.", "asks_for_sources"),
        # Mentioned, not asked for (LoCoMo's chats had 34 such "requests" for sources and comparisons).
        ("Art is such a source of joy. Do you paint?", "asks_for_sources"),
        ("Gather documents like references, financial info and medical checks.", "asks_for_sources"),
        ("Wow, that's gorgeous! Where did you find it?", "asks_for_sources"),
        ("Where did you hear about it?", "asks_for_sources"),
        ("Seeing how they compare to the books is awesome. Have you seen them?", "asks_for_comparison"),
        ("Nature reminds us how tiny we are in comparison, yeah?", "asks_for_comparison"),
        ("I hope you both have weighed the pros and cons.", "asks_for_comparison"),
        # An event's name, not a comparison asked for.
        ("Did you watch the Liverpool vs Chelsea match?", "asks_for_comparison"),
        ("Are you going to the Lakers vs. Celtics game tonight?", "asks_for_comparison"),
        ("Can we watch the Lakers vs. Celtics game?", "asks_for_comparison"),
        ("Who won the Ali versus Frazier fight?", "asks_for_comparison"),
        ("I wrote a summary of my trip.", "asks_for_summary"),
        ("My translation job is fun.", "asks_for_translation"),
        ("Here's an example of how I spent yesterday morning.", "asks_for_examples"),
        ("I started using a bullet journal.", "prefers_bullets"),
        ("I injured myself not too long ago.", "prefers_brevity"),
        ("Fingers crossed it won't take too long.", "prefers_brevity"),
        ("Life's too short, let's have some fun!", "prefers_detail"),
        ("Keep it up! Step by step and have fun along the way.", "asks_step_by_step"),
        ("I wrote my thesis on birds.", "asks_for_code"),
        ("Well, this is a hiking trip.", "greets_first"),
        ("Tell me about Lisbon.", "prefers_brevity"),
    ],
)
def test_detectors_do_not_fire_on_look_alikes(text: str, absent: str) -> None:
    assert absent not in keys(text)


def test_follow_up_on_the_previous_topic() -> None:
    observed = observe_patterns(
        "And how do I freeze the sourdough?", previous_user_text="How do I make sourdough bread at home?"
    )
    follow_up = [observation for observation in observed if observation.key.startswith("asks_followups:")]
    assert follow_up == [
        PatternObservation("asks_followups:sourdough", "asks follow-up questions about sourdough", "sourdough")
    ]


def test_english_with_words_spanish_shares_is_english() -> None:
    assert "writes_in:en" in keys("Just give me the code, no explanation.")
    assert "writes_in:es" in keys("No me gusta el café, pero gracias.")


def test_follow_up_needs_a_topic_not_a_shared_compliment() -> None:
    chat = "That's great, your painting looks awesome!"
    assert not any(k.startswith("asks_followups") for k in keys("Great! What's new? Awesome?", previous_user_text=chat))
    assert "asks_followups:painting" in keys("Great, which painting is new?", previous_user_text=chat)


def test_follow_up_needs_a_topic_not_a_filler_word() -> None:
    assert not any(k.startswith("asks_followups") for k in keys("How is it going?", previous_user_text="Going well!"))
    assert not any(
        k.startswith("asks_followups") for k in keys("Anything special?", previous_user_text="Nothing special.")
    )


def test_follow_up_folds_plurals_and_needs_a_question() -> None:
    assert "asks_followups:dog" in keys("What do dogs eat?", previous_user_text="My dog is sick.")
    assert not any(key.startswith("asks_followups") for key in keys("I like dogs.", previous_user_text="My dog."))
    assert not any(key.startswith("asks_followups") for key in keys("What about cats?", previous_user_text="Dogs."))
    # The key folds "memories" to "memorie" so plurals meet; the description reads as said.
    [found] = observe_patterns("Which memories stay?", previous_user_text="I have great memories of Rome.")[:1]
    assert (found.key, found.description) == ("asks_followups:memorie", "asks follow-up questions about memories")


def test_reply_aware_patterns_need_the_reply() -> None:
    code_reply = "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```"
    assert "asks_to_explain_code" in keys("Can you explain what this does?", assistant_text=code_reply)
    assert "asks_to_explain_code" not in keys("Can you explain what this does?", assistant_text="Sure, sounds good.")
    assert "asks_to_explain_code" not in keys("Can you explain what this does?")
    assert "corrects_answers" in keys("No, that's wrong.", assistant_text="Paris is in Spain.")
    assert "corrects_answers" not in keys("No, that's wrong.")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("How do I sort a list of numbers in Python and print the result?", "en"),
        ("I work as a nurse.", "en"),
        ("I moved to Lisbon in May and I love the tram", "en"),
        ("¿Cómo puedo ordenar una lista de números en el programa?", "es"),
        ("Je voudrais savoir comment trier une liste dans le programme.", "fr"),
        ("Wie kann ich eine Liste in Python sortieren und was ist der Fehler?", "de"),
        ("Como eu faço para ordenar uma lista? Não está funcionando.", "pt"),
        ("Hoe kan ik een lijst sorteren met Python? Het werkt niet.", "nl"),
        ("Как отсортировать список?", "ru"),
        ("リストを並べ替えるにはどうすればいいですか", "ja"),
        ("如何对列表排序", "zh"),
        ("목록을 정렬하는 방법", "ko"),
    ],
)
def test_language(text: str, code: str) -> None:
    written = [key for key in keys(text) if key.startswith("writes_in:")]
    assert written == [f"writes_in:{code}"]


def test_too_little_text_names_no_language() -> None:
    assert not any(key.startswith("writes_in:") for key in keys("ok"))


def test_descriptions_and_evidence_are_short_sentences() -> None:
    observed = observe_patterns("Hey! Just give me the code. " + "x" * 500 + " in bullet points please")
    assert [observation.key for observation in observed][:3] == [
        "greets_first",
        "code_before_explanation",
        "asks_for_code",
    ]
    for observation in observed:
        assert observation.description and observation.evidence
        assert len(observation.evidence) <= 80


@settings(max_examples=300, deadline=None)
@given(user=st.text(max_size=300), previous=st.none() | st.text(max_size=200), reply=st.none() | st.text(max_size=200))
def test_never_raises_unique_keys_and_deterministic(user: str, previous: str | None, reply: str | None) -> None:
    observed = observe_patterns(user, previous_user_text=previous, assistant_text=reply)
    assert len({observation.key for observation in observed}) == len(observed)
    assert observe_patterns(user, previous_user_text=previous, assistant_text=reply) == observed
    for observation in observed:
        assert observation.key and observation.description
