"""Encoder–decoders (text and speech): both stacks read, the encoder then the decoder cross-attending to it, Whisper's
audio in.
"""
