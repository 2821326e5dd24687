"""The corpus index (exBERT's corpus search at any size): its model pass, the build (one process or Ray Data), its
files, checks and search.
"""
