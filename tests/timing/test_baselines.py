"""The read floor's kernel and its expected output, on the emulator (no clock needed)."""

from __future__ import annotations

import numpy as np
import pytest

from hqval.backends.emu import EmuBackend
from hqval.timing import baselines


def _model(data: np.ndarray, threads: int) -> list[int]:
    """Thread t XORs every dword of 16-byte words t, t + threads, ... (a plain loop)."""
    words = data.view(np.uint32).reshape(-1, 4)
    out = [0] * threads
    for i, w in enumerate(words):
        for v in w:
            out[i % threads] ^= int(v)
    return out


def test_threads_are_whole_blocks_with_about_16_words_each() -> None:
    assert baselines.stream_read_threads(1) == 256
    assert baselines.stream_read_threads(16 * 256) == 256
    assert baselines.stream_read_threads(16 * 256 + 1) == 512
    # 17408x5120 qt=44: 47.35 MB -> 723 blocks
    n16 = 17408 * 20 * 136 // 16
    assert baselines.stream_read_threads(n16) == 723 * 256


def test_expected_matches_a_plain_loop() -> None:
    data = np.random.default_rng(3).integers(0, 256, size=16 * 1000 + 8, dtype=np.uint8)
    got = baselines.stream_read_expected(data, 256)
    # The last 8 bytes are not a whole 16-byte word and are not read.
    assert got.tolist() == _model(data[: 16 * 1000], 256)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1030", "gfx1201"])
def test_kernel_reads_every_word_once(arch: str) -> None:
    be = EmuBackend(arch)
    # 600 words, 256 threads: threads 0..87 read three words, the rest two; the first
    # 512 words go through the 4-load loop's remainder path, none through the main loop.
    # A second size runs the unrolled main loop (4 * 256 + 5 words).
    for n16 in (600, 4 * 256 + 5):
        data = np.random.default_rng(n16).integers(0, 256, size=16 * n16, dtype=np.uint8)
        threads = baselines.stream_read_threads(n16)
        src, out = be.alloc(data.nbytes), be.alloc(4 * threads)
        be.copy_in(src, data)
        be.copy_in(out, np.full(threads, 0xDEADBEEF, dtype=np.uint32))
        program = be.load(baselines.stream_read_spec())
        be.launch(program, (threads // 256, 1, 1), (256, 1, 1), [src, n16, out, threads])
        got = be.copy_out(out).view(np.uint32)
        assert got.tolist() == _model(data, threads)


def test_kernel_builds_with_nvrtc_for_the_h200() -> None:
    cuda = pytest.importorskip("hqval.backends.cuda")
    try:
        cuda.compile_source('extern "C" __global__ void k() {}', "sm_90", name="probe.cu")
    except Exception:
        pytest.skip("needs NVRTC (pip install cuda-bindings nvidia-cuda-nvrtc)")
    spec = baselines.stream_read_spec()
    cubin = cuda.compile_source(spec.source.read_text(), "sm_90", name=spec.source.name,
                                include_dirs=spec.include_dirs)
    assert b"hqval_stream_read" in cubin.image


def test_a_read_longer_than_its_buffers_is_refused_before_any_launch() -> None:
    be = EmuBackend("gfx1100")
    buf = be.alloc(1024)
    with pytest.raises(ValueError, match="needs buffers at least that large"):
        baselines.stream_read(be, [buf], 2048, None, None)  # type: ignore[arg-type]
