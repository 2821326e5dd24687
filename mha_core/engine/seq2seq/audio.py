"""Audio in, for Whisper: a file or the browser's recording read through libsndfile (WAV, FLAC, OGG, MP3), mixed to
mono, resampled to 16 kHz and cut to Whisper's 30-second window; or a typed sentence spoken offline by espeak-ng.
Every bad input is refused in one sentence before any model work.

Shapes: N samples at 16 kHz, C mel bins, F = 3,000 spectrogram frames (10 ms each) per 30-second window.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from dataclasses import dataclass
from math import gcd
from pathlib import Path

import numpy as np
import torch

from mha_core.engine.held import kept, value_bytes
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

RATE = 16_000  # Whisper hears 16 kHz
WINDOW_SECONDS = 30.0  # one encoder window: longer audio is cut, with a note
MAX_AUDIO_BYTES = 64 * 2**20  # a larger upload is refused before it is read
MAX_CHANNELS = 2  # stereo is mixed to mono; more channels are refused
MIN_SECONDS = 0.1
SILENT_PEAK = 1e-4  # a clip whose loudest sample is below this is silence
LOUDEST_PEAK = 1e3  # audio samples lie within ±1 (float files may overshoot a little): far beyond is not audio levels
MIN_RATE = 1_000  # samples a second at least (a telephone records 8,000): fewer cannot carry speech
MAX_SPOKEN_CHARS = 400
VOICES = {"en": "en-us", "zh": "cmn-latn-pinyin"}  # espeak-ng's voices for the interface's languages


@dataclass(frozen=True)
class Clip:
    samples: np.ndarray  # (N,) float32 mono at RATE
    seconds: float  # what was kept (at most WINDOW_SECONDS)
    source_seconds: float  # the whole file's length
    source_rate: int
    channels: int

    @property
    def cut(self) -> bool:
        return self.source_seconds > self.seconds + 1e-6


def read_audio(data: bytes | Path) -> Clip:
    """A file's first WINDOW_SECONDS as 16 kHz mono float32; only that much is decoded, however long the file."""
    import soundfile

    data = Path(data) if isinstance(data, str) else data
    try:
        size = data.stat().st_size if isinstance(data, Path) else len(data)
    except OSError as err:
        raise InputError("audio_unreadable_file", N_("{path} cannot be read: {reason}."), path=str(data),
                         reason=err.strerror or type(err).__name__) from None
    if size > MAX_AUDIO_BYTES:
        raise InputError("audio_too_large", N_("The audio file is {mb:,.0f} MB; at most {limit:,.0f} MB is read."),
                          mb=size / 2**20, limit=MAX_AUDIO_BYTES / 2**20)
    if size == 0:
        raise InputError("audio_empty", N_("The audio file is empty."))
    readable = data if isinstance(data, Path) else io.BytesIO(data)
    try:
        with soundfile.SoundFile(readable) as f:
            rate, channels, frames = f.samplerate, f.channels, f.frames
            if rate >= MIN_RATE and channels <= MAX_CHANNELS:  # else refused below, nothing decoded
                samples = f.read(frames=int(min(frames, rate * WINDOW_SECONDS)), dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError, TypeError, ValueError):
        raise InputError("not_audio", N_("This is not audio that can be read (WAV, FLAC, OGG or MP3).")) from None
    check_format(rate, channels)
    return clip_of(samples, rate, channels, frames / rate)


def check_format(rate: int, channels: int) -> None:
    if rate <= 0:
        raise InputError("audio_no_rate", N_("The audio file says it has {rate} samples a second."), rate=rate)
    if rate < MIN_RATE:
        raise InputError("audio_rate_low", N_("The audio has {rate:,} samples a second; speech needs at least "
                                              "{low:,} (a telephone records 8,000)."), rate=rate, low=MIN_RATE)
    if channels > MAX_CHANNELS:
        raise InputError("audio_channels", N_("The audio has {channels} channels; give mono or stereo."),
                          channels=channels)


def clip_of(samples: np.ndarray, rate: int, channels: int, source_seconds: float) -> Clip:
    """(N,C) samples at `rate` -> a checked 16 kHz mono Clip."""
    if not np.isfinite(samples).all():
        raise InputError("audio_not_finite", N_("The audio holds samples that are not numbers (NaN or infinite)."))
    mono = samples.mean(axis=1) if samples.ndim == 2 else samples
    if len(mono) < MIN_SECONDS * rate:
        raise InputError("audio_too_short", N_("The audio is shorter than {seconds} s."), seconds=MIN_SECONDS)
    peak = float(np.abs(mono).max())
    if peak < SILENT_PEAK:
        raise InputError("audio_silent", N_("The audio is silent."))
    if peak > LOUDEST_PEAK:
        raise InputError("audio_out_of_range", N_("The audio's samples reach {peak:.3g}, where audio lies within -1 "
                                                  "to 1: the file's values are not sound levels (save it as 16-bit "
                                                  "PCM WAV)."), peak=peak)
    return Clip(resample(mono, rate), len(mono) / rate, source_seconds, rate, channels)


def span(clip: Clip, start: float, end: float) -> np.ndarray:
    """The clip's samples from `start` to `end` seconds (Whisper's timeline, 16 kHz), exact to the sample:
    samples round(start · RATE) up to round(end · RATE), at least one."""
    first = min(max(round(start * RATE), 0), len(clip.samples) - 1)
    return clip.samples[first:max(round(end * RATE), first + 1)]


def wav_bytes(samples: np.ndarray, rate: int = RATE) -> bytes:
    """Samples (N,) as a 16-bit PCM WAV file (what every browser, phones included, plays)."""
    import soundfile

    out = io.BytesIO()
    soundfile.write(out, np.clip(samples, -1.0, 1.0), rate, subtype="PCM_16", format="WAV")
    return out.getvalue()


def resample(samples: np.ndarray, rate: int) -> np.ndarray:
    """To RATE by polyphase filtering (scipy), float32."""
    if rate == RATE:
        return samples.astype(np.float32)
    from scipy.signal import resample_poly

    g = gcd(rate, RATE)
    return resample_poly(samples, RATE // g, rate // g).astype(np.float32)


def speak(text: str, language: str = "en") -> bytes:
    """`text` spoken by espeak-ng (offline) in the interface's language, as WAV bytes."""
    text = " ".join(text.split())
    if not text:
        raise InputError("nothing_to_speak", N_("There is no text to speak."))
    if len(text) > MAX_SPOKEN_CHARS:
        raise InputError("speak_too_long", N_("Speak at most {n} characters at a time."), n=MAX_SPOKEN_CHARS)
    program = shutil.which("espeak-ng")
    if program is None:
        raise InputError("espeak_missing", N_("espeak-ng is not installed, so no sentence can be spoken here (make "
                                          "install puts it in; or upload a recording)."))
    done = subprocess.run([program, "-v", VOICES.get(language, "en-us"), "--stdout", text], capture_output=True,
                          timeout=60, check=False)
    if done.returncode != 0 or not done.stdout:
        raise InputError("espeak_failed", N_("espeak-ng could not speak this text."))
    return done.stdout


@kept("feature extractors", weigh=lambda extractors: value_bytes([vars(e) for e in extractors]))
def feature_extractor(model_dir: str, mel_bins: int, positions: int) -> object:
    """The folder's Whisper feature extractor, or one built from the model's shape where the folder has none: mel
    bins, and a window of `positions` encoder positions (two 10 ms frames each)."""
    from transformers import WhisperFeatureExtractor

    if (Path(model_dir) / "preprocessor_config.json").is_file():
        return WhisperFeatureExtractor.from_pretrained(model_dir, local_files_only=True)
    return WhisperFeatureExtractor(feature_size=mel_bins, chunk_length=positions * 2 * 160 // RATE or 1)


def log_mel(model_dir: Path, clip: Clip, mel_bins: int = 80, positions: int = 1500) -> torch.Tensor:
    """(1,C,F) Whisper's log-mel spectrogram of the clip, padded with silence to the model's window."""
    extractor = feature_extractor(str(model_dir), mel_bins, positions)
    return extractor(clip.samples, sampling_rate=RATE, return_tensors="pt").input_features


def model_log_mel(model: object, clip: Clip) -> torch.Tensor:
    """log_mel with the model's own mel bins and window (a LoadedModel of Whisper)."""
    config = model.config
    return log_mel(model.model_dir, clip, int(config.num_mel_bins), int(config.max_source_positions))
