"""The named computations a page asks for, one module per kind of input: text, seq2seq, vision, corpus (long texts and
corpora), index.
"""
