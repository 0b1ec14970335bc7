"""The character encoding of a text file: BOM, UTF-8, UTF-16 without BOM, then detection.

Order matters: a BOM is certain, UTF-8 decoding strictly is almost never wrong by accident,
UTF-16 without a BOM shows as NUL bytes in every other position, and only what is left goes
to charset-normalizer, which guesses legacy single- and multi-byte encodings (cp1252,
cp1251, Shift JIS...) from byte statistics. Content that is none of these is refused as
binary, with the reason.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from propdex.errors import ExtractionError
from propdex.extract.signatures import BINARY_SIGNATURES, binary_signature

UTF8 = "utf-8"
# UTF-32 first: its little-endian BOM starts with UTF-16's.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, UTF8),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# In UTF-16 text of Latin, Cyrillic or Greek script, the high byte of most characters is 0,
# so NULs fill one of the two byte positions; CJK text has few NULs but then nothing else
# here would read it either. Below this share of NULs in one position it is not UTF-16.
_UTF16_NUL_SHARE = 0.3
# charset-normalizer ranks by "chaos" (odd character sequences) first; on short text the
# Baltic and Central European code pages score as clean as cp1252 ("crčme" for "crème"),
# so among the nearly clean candidates the one whose letters fit a language best wins.
_CHAOS_MARGIN = 0.1
_COHERENCE_MARGIN = 0.05
# The WHATWG encoding standard reads latin-1 labelled content as windows-1252, and so do we
# when it is as plausible as the best candidate.
_WESTERN_DEFAULT = "cp1252"


@dataclass(frozen=True)
class DecodedText:
    text: str
    encoding: str  # Python codec name: "utf-8", "utf-16-le", "cp1252", ...


def decode_bytes(data: bytes, source: str) -> DecodedText:
    """Decode a text file's bytes; ExtractionError "not a text file (binary content: ...)"
    when no encoding reads them."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return DecodedText(_strict(data[len(bom):], encoding, source), encoding)
    signature = binary_signature(data[:32], BINARY_SIGNATURES)
    if signature is not None:
        raise _binary(source, f"{signature} signature")
    utf16 = _utf16_without_bom(data)
    if utf16 is not None:
        return DecodedText(_strict(data, utf16, source), utf16)
    if b"\x00" in data:
        raise _binary(source, "NUL bytes")
    try:
        return DecodedText(data.decode(UTF8), UTF8)
    except UnicodeDecodeError:
        pass
    for encoding in _detected_encodings(data):
        try:
            return DecodedText(data.decode(encoding), encoding)
        except (UnicodeDecodeError, LookupError):
            continue
    raise _binary(source, "no text encoding fits")


def _binary(source: str, why: str) -> ExtractionError:
    return ExtractionError(source, f"not a text file (binary content: {why})")


def _strict(data: bytes, encoding: str, source: str) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        raise _binary(source, f"invalid {encoding}") from None


def _utf16_without_bom(data: bytes) -> str | None:
    if len(data) < 2 or len(data) % 2:
        return None
    even, odd = data[0::2], data[1::2]
    pairs = len(odd)
    even_share, odd_share = even.count(0) / pairs, odd.count(0) / pairs
    # ASCII-range text: little-endian puts the NUL second, big-endian first.
    if odd_share >= _UTF16_NUL_SHARE and even_share < odd_share / 4:
        return "utf-16-le"
    if even_share >= _UTF16_NUL_SHARE and odd_share < even_share / 4:
        return "utf-16-be"
    return None


def _codec_name(name: str) -> str:
    try:
        return codecs.lookup(name).name
    except LookupError:
        return name


def _detected_encodings(data: bytes) -> list[str]:
    """charset-normalizer's plausible encodings, most plausible first. Empty: no
    confident answer."""
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data))
    if not matches:
        return []
    clean = [m for m in matches if m.chaos <= matches[0].chaos + _CHAOS_MARGIN]
    top = max(m.coherence for m in clean)
    fitting = [m for m in clean if m.coherence >= top - _COHERENCE_MARGIN]
    names = [_codec_name(m.encoding) for m in sorted(fitting, key=lambda m: -m.coherence)]
    if any(_WESTERN_DEFAULT in (m.encoding, *m.could_be_from_charset) for m in fitting):
        names.insert(0, _WESTERN_DEFAULT)
    names += [_codec_name(m.encoding) for m in matches]
    return list(dict.fromkeys(names))
