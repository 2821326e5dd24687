"""Translation by a decoder and its cross-lingual alignment read from self-attention: the few-shot prompt, words of
either language, forced alignment of a given translation, heads chosen on hand alignments, AER."""
