"""How alike an embedder finds lines that have nothing to do with each other.

Embedders disagree on what a cosine means: e5 scores two unrelated lines of chat about 0.8,
MiniLM about 0.05. Thresholds that ask "is this the same topic?" are therefore set relative
to :func:`unrelated_similarity`, measured on the model itself.
"""

from __future__ import annotations

import threading

import numpy as np

from memstrata.embeddings.base import Embedder, normalize_rows

#: Lines of chat on unrelated subjects; the median cosine over their pairs is the baseline.
UNRELATED_LINES = (
    "I finally fixed the leaking tap in the kitchen this morning.",
    "My daughter starts at a new school next week and she is nervous.",
    "Can you recommend a good book about the history of Rome?",
    "The quarterly budget review moved to Thursday afternoon.",
    "We adopted a rescue dog named Biscuit last month.",
    "My knee still hurts after the half marathon on Sunday.",
    "I'm learning to play the cello, but the bowing is hard.",
    "Our flight to Lisbon got cancelled because of the storm.",
    "The tomato plants on the balcony finally have fruit.",
    "Please write the unit tests before refactoring the parser.",
    "I switched to a vegetarian diet two years ago.",
    "The bank charged me twice for the same transfer.",
    "Grandma turns ninety in June and we're planning a party.",
    "The new graphics card makes my old power supply whine.",
    "I volunteer at the animal shelter every Saturday.",
    "The landlord wants to raise the rent by ten percent.",
    "We watched a documentary about deep sea creatures last night.",
    "My favourite painter is Frida Kahlo, I love her self portraits.",
    "The client rejected the logo design again.",
    "I have a dentist appointment at nine tomorrow.",
    "Our team won the regional chess tournament.",
    "I can't decide between a used car and an electric scooter.",
    "The hiking trail to the lake was closed after the landslide.",
    "She baked a lemon cake for the neighbours.",
)

_measured: dict[str, float] = {}
_lock = threading.Lock()


def unrelated_similarity(embedder: Embedder) -> float:
    """The median cosine between pairs of :data:`UNRELATED_LINES`, as ``embedder`` embeds them.

    Measured once per model and process: a local model embeds 24 short lines in well under a
    second; a remote one is sent them in one request. Raises what ``embed_documents`` raises.
    """
    model = embedder.model_id
    with _lock:
        if model in _measured:
            return _measured[model]
    vectors = normalize_rows(embedder.embed_documents(list(UNRELATED_LINES)))
    pairs = np.triu_indices(len(UNRELATED_LINES), k=1)
    similarity = float(np.median((vectors @ vectors.T)[pairs]))
    with _lock:
        return _measured.setdefault(model, similarity)
