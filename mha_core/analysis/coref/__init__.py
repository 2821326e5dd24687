"""Coreference: which heads link a pronoun to its antecedent, in one sentence and on a GAP corpus."""
