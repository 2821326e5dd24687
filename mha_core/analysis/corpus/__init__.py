"""Heads across a corpus: the corpus readers (CoNLL-U, GAP, spaCy), one pass that keeps what the corpus views need,
head distances and Clark et al.'s syntactic heads.
"""
