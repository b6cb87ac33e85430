"""fts_query turns any text into a safe FTS5 MATCH expression."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.retrieval.fulltext import MAX_QUERY_TERMS, STOPWORDS, fts_query, term_coverage


def _terms(expression: str | None) -> list[str]:
    assert expression is not None
    parts = expression.split(" OR ")
    for part in parts:
        assert part.startswith('"') and part.endswith('"') and part.count('"') == 2, part
    return [part[1:-1] for part in parts]


def test_stopwords_are_dropped() -> None:
    assert _terms(fts_query("Where did I put the keys to my car?")) == ["put", "keys", "car"]


def test_falls_back_to_stopwords_when_nothing_else_is_left() -> None:
    assert _terms(fts_query("what is it to you")) == ["what", "is", "it", "to", "you"]
    assert _terms(fts_query("The the THE")) == ["the"]


def test_topical_only_gives_none_for_nothing_but_stopwords() -> None:
    assert fts_query("Who is ?", topical_only=True) is None
    assert fts_query("Who is Ana?", topical_only=True) == '"ana"'


def test_topical_only_drops_words_that_ask_what_was_said() -> None:
    assert fts_query("What did she say about jazz?", topical_only=True) == '"jazz"'
    assert fts_query("What did she tell you?", topical_only=True) is None
    # A word that is as often a noun stays a topic.
    assert fts_query("What was her talk about?", topical_only=True) == '"talk"'
    # Turns are still searched by them: "she said" is how a turn may be found.
    assert fts_query("What did she say?") == '"say"'


@pytest.mark.parametrize("text", ["", "   ", "?!", '"', "*", "((((", "-- ;", "^", "'", "\u3000", "🎉🎉"])
def test_no_words_gives_none(text: str) -> None:
    assert fts_query(text) is None


def test_terms_are_lowercased_and_deduplicated_in_first_seen_order() -> None:
    assert _terms(fts_query("Apple banana APPLE cherry Banana apple")) == ["apple", "banana", "cherry"]


def test_term_cap() -> None:
    words = [f"word{i}" for i in range(MAX_QUERY_TERMS + 20)]
    assert _terms(fts_query(" ".join(words))) == words[:MAX_QUERY_TERMS]
    assert _terms(fts_query(" ".join(words), max_terms=3)) == words[:3]


def test_cap_counts_distinct_terms_after_dedup() -> None:
    text = "alpha " * 100 + "beta gamma"
    assert _terms(fts_query(text, max_terms=3)) == ["alpha", "beta", "gamma"]


def test_operators_and_sql_become_plain_quoted_words() -> None:
    assert _terms(fts_query("NEAR(a bb) AND col:val -xx ^yy zz*")) == ["near", "bb", "col", "val", "xx", "yy", "zz"]


def test_lone_letters_from_contractions_are_not_searched() -> None:
    terms = _terms(fts_query("What is Caroline's status? I don't know, we'll see"))
    assert terms == ["caroline", "status", "know", "see"]
    assert _terms(fts_query("5 stars")) == ["5", "stars"]
    assert _terms(fts_query("x")) == ["x"]  # nothing else left: the letter is searched
    assert _terms(fts_query("'; DROP TABLE turns; --")) == ["drop", "table", "turns"]


def test_unicode_words_kept() -> None:
    assert _terms(fts_query("café 日本語 Ünïcode")) == ["café", "日本語", "ünïcode"]


def test_stopword_list_is_lowercase() -> None:
    assert all(word == word.lower() for word in STOPWORDS)


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    connection.execute("CREATE VIRTUAL TABLE p USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')")
    for row in ["hello world", "near the station", "café au lait", "日本語 テキスト", "and or not"]:
        connection.execute("INSERT INTO t (x) VALUES (?)", (row,))
        connection.execute("INSERT INTO p (x) VALUES (?)", (row,))
    yield connection
    connection.close()


def test_expressions_match_in_a_real_fts5_table(fts: sqlite3.Connection) -> None:
    def match(text: str) -> list[str]:
        expression = fts_query(text)
        assert expression is not None
        return [row[0] for row in fts.execute("SELECT x FROM t WHERE t MATCH ? ORDER BY rowid", (expression,))]

    assert match("NEAR(station)") == ["near the station"]
    assert match('"hello"') == ["hello world"]
    assert match("AND OR NOT") == ["and or not"]
    assert match("world station") == ["hello world", "near the station"]


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=80))
def test_any_text_gives_an_expression_fts5_accepts(fts: sqlite3.Connection, text: str) -> None:
    expression = fts_query(text)
    if expression is None:
        assert not any(ch.isalnum() or ch == "_" for ch in text)
        return
    for table in ("t", "p"):
        fts.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (expression,)).fetchall()
        fts.execute(f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ?", (expression,)).fetchall()


def test_term_coverage_is_the_largest_share_of_the_query_terms_one_text_holds() -> None:
    query = "What did Caroline research about adoption agencies?"  # caroline, research, adoption, agencies
    assert term_coverage(query, ["Caroline: I researched adoption agencies", "agencies"]) == 0.75
    assert term_coverage(query, ["nothing here", "Adoption is hard"]) == 0.25
    assert term_coverage(query, []) == 0.0
    assert term_coverage("the of and", ["the of and"]) == 1.0  # stopwords alone are the terms then
    assert term_coverage("?!", ["anything"]) == 0.0
