"""Issue 42, item 3: "Play one word" plays the word's own samples, exact to the sample (a player's start and end times
round to whole seconds: "street (1.34–1.62 s)" played 1.0–3.47 s)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile

from mha_core.engine.seq2seq.audio import RATE, read_audio, span, wav_bytes
from mha_core.serving.computed import seq2seq as computed_seq2seq
from mha_core.serving.server import Server


def ramp_wav(seconds: float = 3.5, rate: int = RATE) -> bytes:
    """A clip whose every sample says where it is: sample i holds (i mod 20,000) / 40,000."""
    samples = (np.arange(int(seconds * rate)) % 20_000 / 40_000).astype(np.float32)
    out = io.BytesIO()
    soundfile.write(out, samples, rate, subtype="FLOAT", format="WAV")
    return out.getvalue()


@pytest.mark.parametrize(("start", "end"), [(1.34, 1.62), (2.68, 3.16), (0.0, 0.02), (3.4999, 3.5)])
def test_a_word_s_audio_is_its_span_to_the_sample(start, end):
    audio = ramp_wav()
    played, rate = soundfile.read(io.BytesIO(computed_seq2seq.word_audio_of(Server(), audio, start, end)),
                                  dtype="float32")
    first, last = round(start * RATE), max(round(end * RATE), round(start * RATE) + 1)
    expected = (np.arange(first, last) % 20_000 / 40_000).astype(np.float32)
    assert rate == RATE and len(played) == len(expected)  # 1.34–1.62 s: 4,480 samples, not 1.0–3.47 s
    assert np.abs(played - expected).max() <= 1 / 32_768  # 16-bit PCM: within one step


def test_span_keeps_at_least_one_sample_and_stays_inside_the_clip():
    clip = read_audio(ramp_wav(0.5))
    assert len(span(clip, 0.5, 0.5)) == 1 and len(span(clip, 0.9, 1.2)) == 1  # at the end: its last sample
    assert len(span(clip, 0.1, 0.2)) == 1_600


def test_wav_bytes_clip_loud_samples_rather_than_wrapping():
    played, _ = soundfile.read(io.BytesIO(wav_bytes(np.array([2.0, -3.0, 0.5], dtype=np.float32))))
    assert played[0] == pytest.approx(1.0, abs=1e-4) and played[1] == pytest.approx(-1.0, abs=1e-4)


@pytest.mark.slow
def test_the_words_tab_plays_the_chosen_word_s_own_wav():
    """The page's player holds exactly the WAV of the first word's span of the spoken sentence (Streamlit names a
    media file by a hash of its bytes), not the whole clip cut at whole seconds."""
    from streamlit.runtime.memory_media_file_storage import _calculate_file_id

    from mha_core.teaching.examples import SPOKEN
    from tests.conftest import open_app

    at = open_app("views/seq2seq.py", x_tab="Word timestamps")
    assert not at.exception
    player = at.get("audio")[-1].proto
    assert player.start_time == 0 and not player.end_time  # no whole-second cut of the whole clip
    word = at.dataframe[0].value.iloc[0]
    server = Server()
    audio = computed_seq2seq.spoken_of(server, SPOKEN["en"], "en")
    expected = computed_seq2seq.word_audio_of(server, audio, float(word.iloc[1]), float(word.iloc[2]))
    assert _calculate_file_id(expected, "audio/wav") in player.url
