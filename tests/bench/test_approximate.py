"""``bench approximate``: the approximate vector path against the exact one, per source, half, share and mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from memstrata.bench.approximate import ApproximateOptions, run_approximate
from memstrata.bench.datasets import synthetic_texts
from memstrata.errors import InvalidInput
from memstrata.retrieval.vectors import MIN_CODED_ROWS
from tests.conftest import LOCOMO


def test_recall_is_reported_per_source_half_share_and_mode(tmp_path: Path) -> None:
    chats = tmp_path / "chats.txt"
    chats.write_text("\n".join(synthetic_texts(MIN_CODED_ROWS + 500)), encoding="utf-8")  # enough rows to code
    options = ApproximateOptions(data=LOCOMO, texts=(chats,), embedder="hash", shares=(0.01, 1.0), queries=20)
    result = run_approximate(options, Console(quiet=True))
    assert result["benchmark"] == "approximate" and result["embedder"] == "hash-bow-384"
    assert set(result["sources"]) == {"locomo", "chats"}
    assert result["sources"]["chats"]["queries"] == 20
    assert result["memory_rows"] == sum(source["texts"] for source in result["sources"].values())
    rows = result["results"]
    assert len(rows) == 2 * 2 * 2 * 2  # shares x sources x halves x modes
    for row in rows:
        assert 0 <= row["recall_at_10"] <= 1 and row["queries"] >= 1
        if row["share"] == 1.0:  # every row rescored: only bfloat16 rounding swaps ties at the tenth place
            assert row["recall_at_10"] >= 0.97


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (ApproximateOptions(shares=(0.0,)), "--shares"),
        (ApproximateOptions(shares=(1.5,)), "--shares"),
        (ApproximateOptions(texts=(Path("no-such-file.txt"),)), "no such file"),
    ],
)
def test_bad_options_are_refused_before_any_work(options: ApproximateOptions, said: str) -> None:
    with pytest.raises(InvalidInput, match=said):
        run_approximate(options, Console(quiet=True))
