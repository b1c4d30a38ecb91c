"""Format registry: every 4-bit weight format the suite knows, by engine dtype id (``qt``)
and by name.

==========  ======  =====  =======  ==========  ==========================================
name        qt      bytes  rotated  status      header
==========  ======  =====  =======  ==========  ==========================================
hfq4g256    6       136    no       shipping    f32 scale, f32 zero per 256
mq4g256     13      136    FWHT     shipping    same bytes as qt=6 (alias ``mq4v1``)
mq4g256v2   44      136    FWHT     shipping    fp16 (scale, zero) per 128 (alias ``mq4``)
mq4cg256    45      136    FWHT     shipping    fp16 (scale, zero) per 256 + 4 B zero pad
                                                (alias ``mq4c``)
mq4cg256c   1045    132    FWHT     retired     qt=45's header, payload at +4, 132 B stride;
                                                kept only as a negative control
mq4_k       1046    144    FWHT     candidate   per-32 6-bit sub-scales/mins, fp16 d/dmin
==========  ======  =====  =======  ==========  ==========================================

Every format keeps its 128 nibble bytes at the end of the group; all but the retired
compact form put them at [8..136).  qt ids >= 1000 are suite-local: the engine never
allocated one for these formats, and the suite must not squat on an engine id.

The ids are the engine's (design note section 1d: "qt=6 HFQ4G256 is unrotated; qt=13
MQ4G256 is rotated").  qt=1 is the engine's F16, not a 4-bit format: results written before
results schema 2 called HFQ4G256 qt=1, and ``hqval.results.store`` migrates them on load.
"""

from __future__ import annotations

from hqval.formats.affine import AffineFormat, fma_f32
from hqval.formats.base import GROUP_WEIGHTS, Format, Status, pack_nibbles, unpack_nibbles
from hqval.formats.hierarchical import HierarchicalFormat
from hqval.formats.rotation import rotate, sign_vector, unrotate
from hqval.formats.tensorfile import QT_F32, TensorFile, load_tensor, save_tensor

__all__ = [
    "ENGINE_F16_QT",
    "GROUP_WEIGHTS",
    "HFQ4G256_QT",
    "QT_F32",
    "SUITE_LOCAL_QT",
    "V1_QTS",
    "AffineFormat",
    "Format",
    "HierarchicalFormat",
    "Status",
    "TensorFile",
    "all_formats",
    "by_name",
    "by_qt",
    "fma_f32",
    "load_tensor",
    "pack_nibbles",
    "rotate",
    "save_tensor",
    "sign_vector",
    "unpack_nibbles",
    "unrotate",
]

SUITE_LOCAL_QT = 1000
# The engine's F16 dtype id: not a 4-bit format, and the id this suite once gave HFQ4G256.
ENGINE_F16_QT = 1
# The v1 formats (f32 scale + f32 zero per 256): HFQ4G256 and its rotated twin MQ4G256.
HFQ4G256_QT = 6
V1_QTS = (HFQ4G256_QT, 13)

_FORMATS: tuple[Format, ...] = (
    AffineFormat(
        qt=HFQ4G256_QT, name="hfq4g256", group_bytes=136, rotated=False, status="shipping",
        payload_offset=8, header="f32", halves=1,
        description="HFQ4-G256: f32 scale [0..4), f32 zero [4..8) per 256, unrotated",
    ),
    AffineFormat(
        qt=13, name="mq4g256", aliases=("mq4v1",), group_bytes=136, rotated=True,
        status="shipping", payload_offset=8, header="f32", halves=1,
        description="MQ4-G256 (v1): qt=6's bytes on FWHT-rotated weights",
    ),
    AffineFormat(
        qt=44, name="mq4g256v2", aliases=("mq4",), group_bytes=136, rotated=True,
        status="shipping", payload_offset=8, header="f16", halves=2,
        description="MQ4 V2: fp16 scale/zero per 128: [0..4) half 0, [4..8) half 1",
    ),
    AffineFormat(
        qt=45, name="mq4cg256", aliases=("mq4c",), group_bytes=136, rotated=True,
        status="shipping", payload_offset=8, header="f16", halves=1,
        description="MQ4C pad (v1.5): fp16 scale/zero per 256 at [0..4), zero pad [4..8)",
    ),
    AffineFormat(
        qt=1045, name="mq4cg256c", aliases=("mq4c132",), group_bytes=132, rotated=True,
        status="retired", payload_offset=4, header="f16", halves=1,
        description="retired 132 B compact: qt=45's header, payload at +4 (negative control)",
    ),
    HierarchicalFormat(
        qt=1046, name="mq4_k", group_bytes=144, rotated=True, status="candidate",
        payload_offset=16,
        description="144 B hierarchical: per-32 6-bit sub-scales/mins on fp16 d/dmin (Q4_K)",
    ),
)

_BY_QT: dict[int, Format] = {f.qt: f for f in _FORMATS}
_BY_NAME: dict[str, Format] = {
    n: f for f in _FORMATS for n in (f.name, *f.aliases)
}


def all_formats() -> tuple[Format, ...]:
    return _FORMATS


def by_qt(qt: int) -> Format:
    try:
        return _BY_QT[int(qt)]
    except (KeyError, ValueError, TypeError):
        raise KeyError(unknown_qt_message(qt)) from None


def known_qts() -> str:
    """The registered ids with their names, for error messages: ``6 (hfq4g256), 13 ...``."""
    return ", ".join(f"{f.qt} ({f.name})" for f in _FORMATS)


def unknown_qt_message(qt: object) -> str:
    hint = (f"; qt={ENGINE_F16_QT} is the engine's F16, HFQ4G256 is qt=6"
            if qt == ENGINE_F16_QT else "")
    return f"unknown qt={qt}{hint}; known formats: {known_qts()}"


def by_name(name: str) -> Format:
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        known = ", ".join(sorted(_BY_NAME))
        raise KeyError(f"unknown format name {name!r}; known names: {known}") from None
