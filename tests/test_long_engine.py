"""Issue 24: a long text's result keeps each layer's q, k and log-sum-exp and the last hidden states only (no map,
no other hidden state, no (T,T) bias in the kernel's own causal mode), and still gives every map exactly; the
memory estimate of such a forward; a query's row, its top keys and the zoom's ranges."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mha_core import load_model, run
from mha_core.analysis.long import text as long_text
from mha_core.engine import forward as forward_module
from mha_core.engine.budget import forward_bytes
from mha_core.engine.loading.model import for_long_texts
from tests.conftest import long_text as prose
from tests.tolerance import assert_close_to_scale


@pytest.fixture(scope="module")
def long_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_models import make_tiny

    return make_tiny("llama", tmp_path_factory.mktemp("long") / "llama", max_position_embeddings=4096)


def test_a_long_result_keeps_q_k_and_lse_only_and_gives_the_same_maps(long_llama):
    model = load_model(long_llama)
    text = prose(1100)
    kept = long_text.run_long(model, text)
    full = run(for_long_texts(model), text, path="explicit")
    n = kept.lengths[0]
    assert n > 1024 and kept.path == "fused" and kept.layer_probs is None and kept.layer_context is None
    assert len(kept.hidden_states) == 1  # the last layer's, after the final norm
    assert_close_to_scale(kept.hidden_states[0], full.hidden_states[-1], 1e-5)
    for layer in range(model.n_layers):
        block = long_text.map_block(kept, 0, layer, slice(None), range(n - 40, n), range(n))
        assert_close_to_scale(block, full.layer_probs[layer][0, :, n - 40:, :n], 1e-5, what=layer)
    assert long_text.kept_bytes(kept) * 20 < long_text.kept_bytes(full)


def test_the_kernels_causal_mode_builds_no_bias_and_the_estimate_counts_none(long_llama, monkeypatch):
    model = for_long_texts(load_model(long_llama))
    built = []
    real = forward_module.scores_bias
    monkeypatch.setattr(forward_module, "scores_bias", lambda *a: built.append(a) or real(*a))
    run(model, prose(300), path="fused")
    assert built == []  # one decoder text: the kernel's own causal mode
    run(model, [prose(300), "short"], path="fused")  # padding: a bias per text
    assert len(built) == 1
    with_all = forward_bytes(model, 1, 4096, keeps_maps=False)
    assert forward_bytes(model, 1, 4096, keeps_maps=False, bias=False) == with_all - 2 * 4096**2 * 4
    hidden = (model.n_layers + 1) * 4096 * model.d_model * 4
    last = 4096 * model.d_model * 4
    assert forward_bytes(model, 1, 4096, keeps_maps=False, keep_hidden=False) == with_all - hidden + last


def test_a_query_row_its_top_keys_and_the_zoom(long_llama):
    model = load_model(long_llama)
    result = long_text.run_long(model, prose(1100))
    n = result.lengths[0]
    full = run(for_long_texts(model), prose(1100), path="explicit").layer_probs[1][0, 3].numpy()  # (T,T)
    row = long_text.query_row(result, 0, 1, 3, n - 5)
    assert_close_to_scale(row, full[n - 5], 5e-6)
    top = long_text.top_row_keys(row, 4)
    assert [j for j, _ in top] == list(np.argsort(-full[n - 5], kind="stable")[:4])
    assert top[0][1] >= top[1][1] >= top[3][1]
    rows, cols = long_text.zoom_ranges(n, n - 10, -5, size=64)
    assert (rows.start, rows.stop, cols.start, cols.stop) == (n - 64, n, 0, 64)
    assert long_text.zoom_ranges(30, 5, 5) == (range(0, 30), range(0, 30))
    assert long_text.is_long(1025) and not long_text.is_long(1024)
    assert long_text.count_long_pieces(model, prose(1100)) == n


def test_a_long_read_can_stop_at_a_chosen_length(long_llama):
    model = load_model(long_llama)
    cut = long_text.run_long(model, prose(1100), max_pieces=300)
    assert cut.lengths[0] == 300 and cut.truncated[0]
    assert not long_text.run_long(model, prose(1100), max_pieces=10**6).truncated[0]  # its own limit: 4,096


def test_the_needle_lengths_a_model_is_offered():
    from mha_core.analysis.long.roles import default_needle_length, needle_lengths

    assert needle_lengths(8192) == [512, 1024, 2048, 4096, 8192] and default_needle_length([512, 1024, 2048]) == 2048
    assert needle_lengths(600) == [512] and default_needle_length([512]) == 512  # was 600: not on the slider
    assert needle_lengths(300) == [300] and default_needle_length([300]) == 300
    assert default_needle_length(needle_lengths(1500)) == 1024


def widest_texts(budget: int) -> dict[str, str]:
    """Texts of as many pieces per byte as tokenizers make (one unit repeated), each the longest whose NFKD
    UTF-8 stays within `budget` bytes: punctuation (a piece a byte), one-letter words (SentencePiece's ▁ before
    each), rare ideographs and emoji (byte fallback), a ligature NFKD spells in 18 letters, Hangul, combining
    accents, and a seeded mix of all of Unicode's planes in use."""
    import random
    import unicodedata

    rng = random.Random(7)
    mixed = "".join(chr(rng.choice((rng.randrange(0x20, 0x2FFF), rng.randrange(0x4E00, 0x9FFF),
                                    rng.randrange(0x1F300, 0x1FAFF), rng.randrange(0x20000, 0x2A6DF))))
                    for _ in range(budget))
    units = {"punctuation": "!?", "letters": "a ", "ideographs": "𠀀𠀁", "emoji": "😀🧠", "ligature": "ﷺ",
             "hangul": "한글", "accents": "é", "mixed": mixed}
    texts = {}
    for name, unit in units.items():
        text = unit * (budget if len(unit) < budget else 1)
        while len(unicodedata.normalize("NFKD", text).encode()) > budget:
            text = text[:-1]
        texts[name] = text
    return texts


def pieces_without_cut(model, text: str) -> int:
    return len(model.tokenizer(text, truncation=False, split_special_tokens=True)["input_ids"]) + (
        model.bos_id is not None)


def check_short_texts_are_short(model) -> None:
    """may_be_long's promise on `model`'s tokenizer: a text it calls short is at most MAX_PIECES pieces."""
    for name, text in widest_texts(long_text.MAX_PIECES // 2).items():
        assert not long_text.may_be_long(text), name
        assert pieces_without_cut(model, text) <= long_text.MAX_PIECES, (name, pieces_without_cut(model, text))


def test_a_text_may_be_long_only_past_half_max_pieces_bytes_word_pieces(bundled):
    """The Heads page tokenizes a sentence to know whether it is long only past the bound (may_be_long); the
    word-piece tokenizer makes a piece of each punctuation mark."""
    check_short_texts_are_short(bundled)
    half = long_text.MAX_PIECES // 2
    assert long_text.may_be_long("!" * (half + 1)) and not long_text.may_be_long("!" * half)
    assert long_text.may_be_long("ﷺ" * 16) and not long_text.may_be_long("ﷺ" * 15)  # 33 bytes each in NFKD
    assert pieces_without_cut(bundled, "!" * long_text.MAX_PIECES) > long_text.MAX_PIECES  # a bound at MAX_PIECES
    #                                                                                           would be wrong


def test_a_text_may_be_long_only_past_the_bound_on_byte_and_sentencepiece_tokenizers(decoder, gemma):
    """SmolLM2's byte-level BPE and Gemma's SentencePiece with byte fallback (rare ideographs as bytes, ▁ before
    words)."""
    for model in (decoder, gemma):
        check_short_texts_are_short(model)
