"""``vector_approximate_from`` through the facade: a large user is searched through codes, 0 keeps it exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.bench.datasets import synthetic_texts
from memstrata.errors import ConfigError
from memstrata.retrieval.vectors import MIN_CODED_ROWS

TURNS = MIN_CODED_ROWS + 200


def _filled(home: Path, **settings: int) -> Memory:
    memory = Memory(home, embedder="hash", background=False, **settings)
    texts = list(synthetic_texts(TURNS))
    texts[700] = "The lighthouse keeper on Inishmore paints her boat teal every April."
    for start in range(0, TURNS, 500):
        chunk = texts[start : start + 500]
        memory.add([{"role": "user", "content": text} for text in chunk], user_id="ana", session_id=f"s{start}")
    return memory


@pytest.mark.parametrize(("threshold", "coded"), [(MIN_CODED_ROWS, 1), (0, 0), (TURNS + 1, 0)])
def test_a_user_past_the_setting_is_searched_through_codes_and_still_found(
    tmp_path: Path, threshold: int, coded: int
) -> None:
    with _filled(tmp_path, vector_approximate_from=threshold) as memory:
        hits = memory.search("lighthouse keeper paints her boat teal", user_id="ana", mode="vector", limit=3)
        assert hits[0].content.startswith("The lighthouse keeper")
        assert memory.info()["vector_cache"]["approximate_users"] == coded


def test_a_negative_setting_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="vector_approximate_from"):
        Memory(tmp_path, embedder="hash", background=False, vector_approximate_from=-1)
