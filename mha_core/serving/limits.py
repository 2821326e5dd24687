"""The limits and text rules pages state to visitors, taken from the layers that enforce them: pages import no
mha_core.engine module (pyproject's import contracts), so what they say cannot drift from what is enforced; and the
limits the server sets on what a visitor gives it (an upload's sentences)."""

from mha_core.engine.arch import MAX_PIECES
from mha_core.engine.batching import CORPUS_MAX_PIECES, CORPUS_TEXT_MAX_PIECES
from mha_core.engine.budget import megabytes
from mha_core.engine.tokens import MAX_INPUT_CHARS, without_spaces

__all__ = ["CORPUS_MAX_PIECES", "CORPUS_TEXT_MAX_PIECES", "MAX_INPUT_CHARS", "MAX_PIECES", "UPLOAD_MAX_SENTENCES",
           "megabytes", "without_spaces"]

UPLOAD_MAX_SENTENCES = 5_000  # sentences (CoNLL-U) or examples (GAP) analysed per upload: ~1 min on 2 cores
