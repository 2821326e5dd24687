"""Encoder–decoders: their own output (decoding), Whisper's transcript with word times, alignment heads and word
alignment.
"""
