"""Translation's alignment (issue 46), on a tiny random Llama with the bundled word-piece tokenizer (it reads every
Chinese character as one piece): words and the prompt, the word maps against a naive loop over the run's maps, the
link rules, AER by hand, the head choice on synthetic maps, and bad input in one sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model, run
from mha_core.analysis.translation import align as alignment
from mha_core.analysis.translation import run as reading
from mha_core.analysis.translation.gold import (
    AlignedPair,
    aer,
    diagonal,
    halves,
    newswire_pairs,
    pharaoh,
    read_pharaoh,
)
from mha_core.analysis.translation.heads import choose, combined_aer
from mha_core.analysis.translation.prompt import EXAMPLE_PAIRS, prompt_for
from mha_core.analysis.translation.words import joined, split_words
from mha_core.engine.loading.model import bundled_model_dir
from mha_core.engine.tokens import InputError

SOURCE = "那只动物没有过马路，因为它太累了。"
TARGET = "The animal didn't cross the road because it was too tired."


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    import transformers

    torch.manual_seed(3)
    config = transformers.LlamaConfig(vocab_size=30528, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=64, head_dim=8,
                                      max_position_embeddings=256, tie_word_embeddings=True)
    path = tmp_path_factory.mktemp("llama-translate")
    transformers.LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    transformers.AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True).save_pretrained(path)
    return load_model(path)


def test_words_of_either_language_and_where_they_lie_in_the_text():
    assert split_words(SOURCE, "zh")[:4] == ("那", "只", "动物", "没有")  # jieba's dictionary words
    assert split_words("动物 没有 过 马路", "zh") == ("动物", "没有", "过", "马路")  # words given by spaces
    assert split_words(TARGET, "en")[:3] == ("The", "animal", "didn't") and split_words(TARGET, "en")[-1] == "."
    assert split_words("-LRB- Reporter -RRB-", "en") == ("(", "Reporter", ")")  # treebank brackets read as typed
    for words, language in ((split_words(SOURCE, "zh"), "zh"), (split_words(TARGET, "en"), "en"),
                            (("在", "2002", "年", "Xinhua", "说"), "zh")):
        text, spans = joined(words, language)
        assert [text[a:b] for a, b in spans] == list(words)
    assert joined(split_words(TARGET, "en"), "en")[0] == TARGET  # no space before the full stop
    assert joined(("在", "2002", "年", "USA", "Today", "说"), "zh")[0] == "在2002年USA Today说"  # Latin words spaced


def test_the_prompt_holds_the_examples_then_the_pair_and_every_word_where_it_says():
    source, target = split_words(SOURCE, "zh"), split_words(TARGET, "en")
    prompted = prompt_for(source, "zh", "en", target)
    assert prompted.text.startswith(f"Chinese: {EXAMPLE_PAIRS[0]['zh']}\nEnglish: {EXAMPLE_PAIRS[0]['en']}\n")
    assert prompted.text.endswith(f"Chinese: {SOURCE}\nEnglish: {TARGET}")
    assert [prompted.text[a:b] for a, b in prompted.source_spans] == list(source)
    assert [prompted.text[a:b] for a, b in prompted.target_spans] == list(target)
    assert prompted.text[:prompted.prompt_end].endswith("English:")
    with pytest.raises(InputError, match="both English"):
        prompt_for(target, "en", "en")
    with pytest.raises(InputError, match="not 'fr'"):
        prompt_for(source, "zh", "fr")


def test_word_maps_equal_a_naive_loop_over_the_run_s_maps(llama):
    both = reading.both_rows(llama, SOURCE, TARGET, "zh", "en")
    result = run(llama, both["self"].prompt, path="explicit")
    maps = result.text_attention(0)  # (L,H,P,P)
    offsets = result.batch.offsets[0]
    prompted = prompt_for(both["self"].source_words, "zh", "en", both["self"].target_words)

    def pieces(span):
        return [p for p, (a, b) in enumerate(offsets) if b > a and a < span[1] and b > span[0]]

    for rows, shift in (("self", 0), ("previous", 1)):
        ours = both[rows].maps
        for t, t_span in enumerate(prompted.target_spans):
            for s, s_span in enumerate(prompted.source_spans):
                rows_of = [p - shift for p in pieces(t_span)]
                naive = np.mean([sum(maps[:, :, r, q] for q in pieces(s_span)) for r in rows_of], axis=0)
                assert np.abs(ours[:, :, t, s] - naive).max() <= 1e-5, (rows, t, s)
    assert both["previous"].maps.shape == (llama.n_layers, llama.n_heads, len(prompted.target_spans),
                                           len(prompted.source_spans))
    assert reading.word_maps(llama, SOURCE, TARGET, "zh", "en").rows == "previous"  # the default


def test_column_scaling_divides_each_source_word_by_its_mean_over_the_translation():
    rng = np.random.default_rng(2)
    maps = alignment.WordMaps(("a", "b", "c"), ("x", "y"), rng.random((2, 3, 2, 3)).astype(np.float32), "", "self")
    scaled = maps.scaled("columns").maps
    for layer, head, t, s in np.ndindex(2, 3, 2, 3):
        column = [maps.maps[layer, head, u, s] for u in range(2)]
        assert abs(scaled[layer, head, t, s] - maps.maps[layer, head, t, s] / (sum(column) / 2)) <= 1e-5
    assert maps.scaled("plain") is maps


def test_link_rules_against_naive_loops():
    rng = np.random.default_rng(0)
    for _ in range(20):
        m = rng.random((rng.integers(2, 9), rng.integers(2, 9)))
        rows = {(int(np.argmax(m[t])), t) for t in range(m.shape[0])}
        columns = {(s, int(np.argmax(m[:, s]))) for s in range(m.shape[1])}
        assert alignment.links_of(m, "argmax") == rows
        assert alignment.links_of(m, "intersect") == rows & columns
        grown = alignment.links_of(m, "grow")
        assert rows & columns <= grown <= rows | columns
        for s, t in grown - (rows & columns):  # each added link touches a link and aligns a word left unaligned
            assert any(abs(s - a) <= 1 and abs(t - b) <= 1 for a, b in grown if (a, b) != (s, t))


def is_mark(word: str) -> bool:
    return all(not c.isalnum() for c in word) or word in ("-LRB-", "-RRB-")


def may_link(source: tuple[str, ...], target: tuple[str, ...], t: int, s: int) -> bool:
    """The rule as the page states it: same kind, or a kind the other sentence lacks."""
    return (is_mark(target[t]) == is_mark(source[s]) or is_mark(target[t]) not in {is_mark(w) for w in source}
            or is_mark(source[s]) not in {is_mark(w) for w in target})


def test_punctuation_links_only_to_punctuation_against_a_plain_loop():
    """Issue 77.6: "，" linked to "because" and "was". A mark links only to a mark, a word only to a word, unless the
    other sentence has none of its kind (then the heads' strongest link stands)."""
    rng = np.random.default_rng(4)
    vocabulary = ("动物", "，", "因为", "。", "(", "it", ".", "-LRB-", "?!", "tired")
    for _ in range(40):
        source = tuple(str(w) for w in rng.choice(vocabulary, rng.integers(1, 7)))
        target = tuple(str(w) for w in rng.choice(vocabulary, rng.integers(1, 7)))
        m = rng.random((len(target), len(source)))
        rows = set()
        for t in range(len(target)):
            best = max((s for s in range(len(source)) if may_link(source, target, t, s)), key=lambda s: m[t, s])
            rows.add((best, t))
        allowed = alignment.same_kind(source, target)
        assert alignment.links_of(m, "argmax", allowed) == rows
        for rule in alignment.LINK_RULES:
            assert all(may_link(source, target, t, s) for s, t in alignment.links_of(m, rule, allowed))
    source, target = ("它", "，", "因为", "累"), ("it", "because", "tired", ".")  # "，" strongest for "because"
    m = np.array([[0.6, 0.1, 0.1, 0.1], [0.1, 0.5, 0.3, 0.1], [0.1, 0.1, 0.1, 0.7], [0.1, 0.2, 0.3, 0.1]])
    assert alignment.links_of(m, "argmax") == {(0, 0), (1, 1), (3, 2), (2, 3)}
    assert alignment.links_of(m, "argmax", alignment.same_kind(source, target)) == {(0, 0), (2, 1), (3, 2), (1, 3)}
    words = ("它", "因为", "累")  # no mark in the source: the full stop links where the heads say
    assert alignment.links_of(m[:, [0, 2, 3]], "argmax", alignment.same_kind(words, target)) == {
        (0, 0), (1, 1), (2, 2), (1, 3)}


def test_traditional_chinese_is_split_as_its_simplified_and_simplified_writes_它():
    """Issue 77.6: 因為 was cut into 因 and 為 (jieba's dictionary is Simplified), and the Simplified line kept 牠."""
    from mha_core.engine.words import simplified

    written = "牠不跨了路，因為牠太累了。"
    words = split_words(written, "zh")
    assert "".join(words) == written and "因為" in words  # the characters as written
    assert [len(w) for w in words] == [len(w) for w in split_words(simplified(written), "zh")]
    assert simplified(written) == "它不跨了路，因为它太累了。"
    assert simplified("那只动物没有过马路") == "那只动物没有过马路"


def test_words_that_share_a_piece_are_one_word():
    """Issue 77.6: 因为 -> "it": Gemma reads 因为它 as one piece, so 因为's and 它's columns were the same and the tie
    went to 因为. Neighbours that share a piece are one word (the text between them kept)."""
    spans, groups = [(0, 2), (2, 3), (3, 4), (4, 5), (6, 8)], [[5], [5], [6], [6, 7], [8]]
    assert alignment.shared_pieces("因为它太累 ab", spans, groups) == ("因为它", "太累", "ab")
    assert alignment.shared_pieces("因为它太累", spans[:4], [[1], [2], [3], [4]]) == ("因为", "它", "太", "累")


def test_the_pronoun_lines_say_what_is_linked_and_what_is_not():
    """Issue 77.6: "牠… 对齐到原文的 —". Each pronoun of the translation with its links (none said as none), then
    each pronoun of the source that no pronoun of the translation is linked to."""
    from mha_core.analysis.translation.translate import PronounLink, Translation, pronoun_links
    from mha_core.teaching.examples import PRONOUNS

    source = ("The", "animal", "didn't", "cross", "because", "it", "was", "tired", ".")
    target = ("牠", "不", "跨", "因為", "牠", "累", "。")
    links = frozenset({(1, 0), (4, 3), (7, 5), (8, 6)})
    maps = alignment.WordMaps(source, target, np.zeros((1, 1, len(target), len(source)), np.float32), "", "self")
    result = Translation("", "".join(target), "en", "zh", source, target, links, ((0, 0),), maps.maps[0, 0], maps,
                         True)
    assert pronoun_links(result, PRONOUNS) == (PronounLink(False, "牠", ("animal",), False),
                                               PronounLink(False, "牠", (), False), PronounLink(True, "it", (), False))
    carried = Translation("", "", "en", "zh", source, target, links | {(5, 4)}, ((0, 0),), maps.maps[0, 0], maps, True)
    assert pronoun_links(carried, PRONOUNS)[1:] == (PronounLink(False, "牠", ("it",), True),)
    assert result.simplified_translation == "它不跨因为它累。"


def test_aer_by_hand_and_the_pharaoh_format():
    sure, possible = read_pharaoh("0-0 1-2 2-1-P")
    assert sure == {(0, 0), (1, 2)} and possible == {(0, 0), (1, 2), (2, 1)}
    assert pharaoh({(1, 2), (0, 0)}) == "0-0 1-2"
    pair = AlignedPair(("a", "b", "c"), ("x", "y", "z"), sure, possible)
    # A = {0-0, 2-1, 2-2}: |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 2 -> 1 - 3/5
    assert aer([frozenset({(0, 0), (2, 1), (2, 2)})], [pair]) == pytest.approx(0.4)
    assert aer([sure], [pair]) == 0.0
    assert diagonal(5, 3) == {(0, 0), (2, 1), (4, 2)}


def test_the_bundled_set_and_its_halves():
    pairs = newswire_pairs("zh")
    assert len(pairs) == 150 and all(p.sure <= p.possible for p in pairs)
    assert all(i < len(p.source) and j < len(p.target) for p in pairs for i, j in p.possible)
    turned = newswire_pairs("en")
    assert turned[0].source == pairs[0].target and turned[0].sure == {(j, i) for i, j in pairs[0].sure}
    development, held_back = halves(pairs)
    assert len(development) == len(held_back) == 75 and development[-1] is pairs[74]


def test_the_choice_finds_the_head_that_follows_the_gold_links():
    rng = np.random.default_rng(1)
    pairs = newswire_pairs("zh")[:6]
    maps = []
    for pair in pairs:
        noise = rng.random((2, 3, len(pair.target), len(pair.source))).astype(np.float32) * 0.5
        for s, t in pair.sure:
            noise[1, 2, t, s] += 1.0  # head L1 H2 follows the sure links
        maps.append(alignment.WordMaps(pair.source, pair.target, noise, "", "previous"))
    choice = choose(maps, pairs, "zh-en")
    assert choice.heads[0] == (1, 2) and choice.aers[1, 2] == choice.aers.min()
    assert choice.combined_aer == pytest.approx(combined_aer(maps, pairs, choice.heads, choice.rule))
    assert choice.combined_aer < choice.diagonal_aer


def test_bad_input_is_one_sentence(llama, tiny):
    from mha_core.analysis.translation.translate import align

    with pytest.raises(InputError, match="empty"):
        align(llama, "  ", TARGET, "zh", "en")
    with pytest.raises(InputError, match="both Chinese"):
        align(llama, SOURCE, SOURCE, "zh", "zh")
    with pytest.raises(InputError, match="masked pieces|no language-model head"):
        align(tiny, SOURCE, TARGET, "zh", "en")
    with pytest.raises(InputError, match="does not read Chinese: it reads 那 只 动 物 没 过 as unknown"):
        align(llama, SOURCE, TARGET, "zh", "en")  # a BERT vocabulary: most Chinese characters are [UNK]
    with pytest.raises(InputError, match="Alignment methods are heads, both, hidden, weighted, ensemble, not 'fast"):
        align(llama, SOURCE, TARGET, "zh", "en", method="fast_align")
    with pytest.raises(InputError, match="pooled by sum, max, first, not 'mean'"):
        reading.word_maps(llama, SOURCE, TARGET, "zh", "en", pooling="mean")
    with pytest.raises(InputError, match="reads at most 256"):
        reading.word_maps(llama, SOURCE * 8, TARGET * 8, "zh", "en")
