"""The offline token counter against real BPE vocabularies (o200k_base, cl100k_base)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.retrieval.assembly import one_line
from memstrata.retrieval.tokens import count_joined, count_tokens, truncate_to_tokens
from tests.conftest import LOCOMO

quicktok = pytest.importorskip("quicktok", reason="the reference BPE tokenizer ships in the test extra")
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _blocks() -> list[str]:
    samples = json.loads(LOCOMO.read_text(encoding="utf-8"))
    lines = [
        f"{turn['speaker']}: {turn['text']}"
        for sample in samples
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]
    rng = random.Random(7)
    return ["\n".join(rng.sample(lines, 30)) for _ in range(100)]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_dialogue_counts_are_within_six_percent_of_bpe(encoding: str) -> None:
    reference = quicktok.get_encoding(encoding)
    blocks = _blocks()
    estimated = sum(count_tokens(block) for block in blocks)
    actual = sum(len(reference.encode(block)) for block in blocks)
    assert abs(estimated - actual) / actual < 0.06


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_prose_counts_are_within_six_percent_of_bpe(encoding: str) -> None:
    reference = quicktok.get_encoding(encoding)
    text = "\n".join(path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md")))
    estimated, actual = count_tokens(text), len(reference.encode(text))
    assert abs(estimated - actual) / actual < 0.06


# One sentence per script, written for this test: what a memory block may hold besides English.
_SCRIPTS = {
    "Chinese": "我昨天和朋友一起去公园散步，天气非常好。我们聊了很多关于工作和家庭的事情。",
    "Japanese": "昨日は友達と公園を散歩しました。とても天気が良かったです。来月、東京に行く予定です。",
    "Korean": "어제 친구와 함께 공원에서 산책을 했어요. 날씨가 정말 좋았어요. 다음 달에 서울에 가요.",
    "Hebrew": "אתמול הלכתי לטייל בפארק עם חבר. מזג האוויר היה נהדר. בחודש הבא אני מבקר בירושלים.",
    "Arabic": "ذهبت أمس للتنزه في الحديقة مع صديقي. كان الطقس رائعا جدا. في الشهر القادم أزور القاهرة.",
    "Hindi": "कल मैं अपने दोस्त के साथ पार्क में टहलने गया। मौसम बहुत अच्छा था। अगले महीने मैं दिल्ली जाऊंगा।",
    "Russian": "Вчера я гулял в парке с другом. Погода была прекрасной. В следующем месяце я еду в Москву.",
    "Greek": "Χθες περπάτησα στο πάρκο με έναν φίλο. Ο καιρός ήταν υπέροχος. Τον επόμενο μήνα πάω στην Αθήνα.",
    "Vietnamese": "Hôm qua tôi đi dạo trong công viên với một người bạn. Thời tiết thật tuyệt vời.",
    "Thai": "เมื่อวานฉันไปเดินเล่นในสวนสาธารณะกับเพื่อน อากาศดีมาก เดือนหน้าฉันจะไปเยี่ยมพ่อแม่",
    "emoji": "Great news 🎉🎉 we adopted a puppy 🐶❤️ and she loves the beach 🏖️🌊 so much 😂👍🏽 🇵🇹 👨‍👩‍👧",
    "combining marks": "Zalgo t̷e̵x̶t̴ with combining marks: é (e + ́) and n̈ and a̐ everywhere",
    "symbols": "∑ x² ≤ ∞ → λ·μ ≈ π ± √2 ∀ε>0 ∃δ ⊂ ℝ",
    "Armenian": "Երեկ ես ընկերոջս հետ զբոսնում էի այգում։ Եղանակը հիանալի էր։",
    "Georgian": "გუშინ მეგობართან ერთად პარკში ვისეირნე. ამინდი მშვენიერი იყო.",
    "Amharic": "ትናንት ከጓደኛዬ ጋር በፓርኩ ውስጥ ተራመድኩ። አየሩ በጣም ጥሩ ነበር።",
    "Tamil": "நேற்று நான் என் நண்பருடன் பூங்காவில் நடந்தேன். வானிலை மிகவும் நன்றாக இருந்தது.",
    "line breaks as a block shows them": one_line("one\ntwo\n\nthree\r\nfour"),
}


@pytest.mark.parametrize("script", sorted(_SCRIPTS))
def test_other_scripts_and_emoji_are_not_undercounted(script: str) -> None:
    # A budget is a ceiling: an estimate well under the real count would overrun a model's window.
    text = "\n".join([_SCRIPTS[script]] * 5)
    estimated = count_tokens(text)
    assert estimated >= 0.9 * len(quicktok.get_encoding("cl100k_base").encode(text))
    assert estimated >= 0.95 * len(quicktok.get_encoding("o200k_base").encode(text))


def test_other_languages_in_latin_letters_count_close_to_bpe() -> None:
    # Their words are charged as English ones are, which both vocabularies split a little finer.
    text = "Gestern bin ich mit einem Freund im Park spazieren gegangen. Das Wetter war großartig.\n" * 5
    estimated = count_tokens(text)
    assert estimated >= 0.85 * len(quicktok.get_encoding("cl100k_base").encode(text))
    assert estimated >= 0.95 * len(quicktok.get_encoding("o200k_base").encode(text))


def test_edge_cases() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello") == 1
    assert count_tokens("1234567") == 3
    assert count_tokens("東京都") >= 2


def test_truncation_fits_and_keeps_a_prefix() -> None:
    text = "one two three four five six seven eight nine ten"
    cut = truncate_to_tokens(text, 4)
    assert text.startswith(cut) and count_tokens(cut) <= 4 and cut
    assert truncate_to_tokens(text, 100) == text
    assert truncate_to_tokens(text, 0) == ""


def test_underscores_count() -> None:
    assert count_tokens("_" * 80) >= 20
    assert count_tokens("__init__") >= 3


_LINE_CHARACTERS = st.characters(whitelist_categories=("L", "N", "P", "S", "Zs"), whitelist_characters="\n\t'_")


@given(st.lists(st.text(_LINE_CHARACTERS, max_size=40), max_size=8))
def test_a_joined_block_costs_exactly_what_counting_it_whole_costs(lines: list[str]) -> None:
    assert count_joined(lines) == count_tokens("\n".join(lines))
    trimmed = [line.strip() for line in lines if line.strip()]  # the shortcut's case: lines summed
    assert count_joined(trimmed) == count_tokens("\n".join(trimmed))
