"""Offline token counting close to the BPE tokenizers of common chat models.

No vocabulary ships and nothing downloads. Tests keep the count within 6% of OpenAI's
``o200k_base`` and ``cl100k_base``, and outside the Latin and Cyrillic alphabets at least
0.9 of ``cl100k_base``, so a block stays within its budget under either. See
docs/retrieval.md (tokens are counted offline).
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
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
        elif word.isascii():
            total += max(1, math.ceil(len(word) / PUNCTUATION_PER_TOKEN))
        else:
            total += _by_character(word)
    return total


def _word_tokens(word: str) -> int:
    if word.isascii():
        if len(word) <= WHOLE_WORD_LETTERS:
            return 1
        return 1 + math.ceil((len(word) - WHOLE_WORD_LETTERS) / LETTERS_PER_TOKEN)
    if all(_latin_or_cyrillic(character) for character in word):
        return max(1, math.ceil(len(word) / 2))  # accents split words finer: about two letters a token
    return _by_character(word)


def _latin_or_cyrillic(character: str) -> bool:
    code = ord(character)
    return code < 0x250 or 0x400 <= code <= 0x52F


def _by_character(text: str) -> int:
    """Other scripts, symbols and emoji: what ``cl100k_base`` charges them, character by character."""
    return max(1, math.ceil(sum(_character_cost(character) for character in text)))


@functools.lru_cache(maxsize=4096)
def _character_cost(character: str) -> float:
    code = ord(character)
    if code < 0x80:
        return 0.35  # an ASCII letter inside such a word
    if unicodedata.category(character) in ("Mn", "Me"):
        return 1.5  # combining marks (Devanagari and Thai vowel signs, accents added on)
    if _latin_or_cyrillic(character):
        return 0.6
    if character.isalpha():
        if 0x2E80 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF or code >= 0x20000:
            return 1.3  # CJK ideographs, kana, Hangul
        if 0x370 <= code <= 0x3FF or 0x590 <= code <= 0x5FF or 0x1E00 <= code <= 0x1EFF:
            return 1.2  # Greek, Hebrew, Vietnamese letters
        if 0x600 <= code <= 0x6FF or 0x900 <= code <= 0x97F or 0xE00 <= code <= 0xE7F:
            return 1.0  # Arabic, Devanagari, Thai
        # Scripts rarer in the vocabularies (Armenian, Georgian, Ethiopic, Tamil …) split into
        # their bytes, or nearly.
        return float(len(character.encode("utf-8")))
    return len(character.encode("utf-8")) * 0.85  # symbols, emoji and their joiners: " ⏎" costs 3


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
