"""Offline token counting close to the BPE tokenizers of common chat models.

No vocabulary ships and nothing downloads: the text is split the way GPT-style BPE
pre-tokenizers split it (words with their leading space, digit groups of up to three,
punctuation runs), and each piece is charged what such tokenizers typically charge for it.
On LoCoMo dialogue it counts ≈5% more than OpenAI's ``o200k_base`` and ≈1% more
than ``cl100k_base``; on Markdown ≈4% fewer than both. Tests keep it within 6% of both.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence

# Contractions, words (with one leading space), digit groups, spaces, punctuation runs.
_PIECES = re.compile(r"""'(?:s|t|re|ve|m|ll|d)\b| ?[^\W\d_]+| ?\d{1,3}|\s+(?!\S)|\s+| ?[^\s\w]+|_+""", re.IGNORECASE)
# A word up to this many letters is one token in both vocabularies, in the main.
WHOLE_WORD_LETTERS = 10
# Letters per extra token in longer (rarer) words.
LETTERS_PER_TOKEN = 4
# Punctuation merges into tokens of about this many characters.
PUNCTUATION_PER_TOKEN = 3


# Context assembly counts the same excerpt and date lines again for every query; short texts
# are remembered (a few MB at most), long blocks are counted afresh.
CACHED_TEXT_CHARS = 2_000
CACHED_TEXTS = 16_384


def count_tokens(text: str) -> int:
    """Estimate how many tokens ``text`` takes in a chat model's prompt."""
    if len(text) <= CACHED_TEXT_CHARS:
        return _count_cached(text)
    return _count(text)


def count_joined(lines: Sequence[str]) -> int:
    """``count_tokens("\\n".join(lines))``, from the lines' own (remembered) counts where that is exact.

    No piece but a whitespace run crosses a newline, so when no line starts or ends with
    whitespace the block costs its lines plus one token per newline; otherwise it is
    counted whole.
    """
    if any(not line or line[0].isspace() or line[-1].isspace() for line in lines):
        return count_tokens("\n".join(lines))
    return sum(count_tokens(line) for line in lines) + max(0, len(lines) - 1)


@functools.lru_cache(maxsize=CACHED_TEXTS)
def _count_cached(text: str) -> int:
    return _count(text)


def _count(text: str) -> int:
    total = 0
    for match in _PIECES.finditer(text):
        piece = match.group()
        word = piece.strip()
        if not word:
            total += "\n" in piece or len(piece) > 1  # a lone space merges into the next word; newlines do not
        elif word[0].isdigit():
            total += 1
        elif word[0].isalpha():
            total += _word_tokens(word)
        else:
            total += max(1, math.ceil(len(word) / PUNCTUATION_PER_TOKEN))
    return total


def _word_tokens(word: str) -> int:
    if not word.isascii():
        # Accented and non-Latin scripts split much finer; CJK is about a token a character.
        return max(1, math.ceil(len(word) / 2))
    if len(word) <= WHOLE_WORD_LETTERS:
        return 1
    return 1 + math.ceil((len(word) - WHOLE_WORD_LETTERS) / LETTERS_PER_TOKEN)


def truncate_to_tokens(text: str, limit: int) -> str:
    """The longest prefix of ``text`` (cut at a piece boundary) that fits in ``limit`` tokens."""
    if limit <= 0:
        return ""
    if count_tokens(text) <= limit:
        return text
    used = 0
    end = 0
    for match in _PIECES.finditer(text):
        cost = count_tokens(match.group())
        if used + cost > limit:
            break
        used += cost
        end = match.end()
    return text[:end].rstrip()
