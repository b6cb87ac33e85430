"""Turn any user text into a safe FTS5 query: words only, quoted, OR-ed."""

from __future__ import annotations

import re

# Words that carry no topic: matching them only adds noise to BM25 with OR semantics.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
MAX_QUERY_TERMS = 64
_WORD = re.compile(r"\w+", re.UNICODE)


def fts_query(text: str, *, max_terms: int = MAX_QUERY_TERMS) -> str | None:
    """Return an FTS5 MATCH expression for ``text``, or ``None`` if it has no searchable word.

    Every term is a double-quoted string, so FTS5 operators (AND, OR, NOT, NEAR, ``*``,
    ``^``, ``-``, ``:``, parentheses) and SQL in the input are searched as plain words
    and can never raise a syntax error. Stopwords are dropped unless nothing else is left.
    """
    words = [word.lower() for word in _WORD.findall(text)]
    terms = list(dict.fromkeys(word for word in words if word not in STOPWORDS))
    if not terms:
        terms = list(dict.fromkeys(words))
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms[:max_terms])
