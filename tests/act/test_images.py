"""What view_image may send: a real PNG or JPEG within the limits; anything else is refused with the reason."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from orchestrator.llm.image_input import ImageLimits, ImageRefused, check_image


def png(width: int = 30, height: int = 20) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "navy").save(buffer, "PNG")
    return buffer.getvalue()


def jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), "orange").save(buffer, "JPEG")
    return buffer.getvalue()


def png_header_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims a size its (missing) pixels never had: a decompression bomb's first bytes."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + header + chunk(b"IEND", b"")


def test_a_png_and_a_jpeg_are_accepted_with_their_size_and_type():
    shown = check_image("build/a.png", png(), ImageLimits())
    assert (shown.mime, shown.width, shown.height) == ("image/png", 30, 20)
    assert shown.data_url.startswith("data:image/png;base64,iVBOR")
    assert check_image("build/b.jpg", jpeg(), ImageLimits()).mime == "image/jpeg"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"GIF89a" + b"\0" * 100, "not a PNG or JPEG"),
        (b"%PDF-1.7\n", "not a PNG or JPEG"),
        (b"\x89PNG\r\n\x1a\n" + b"garbage" * 50, "not a readable PNG"),
        (b"\xff\xd8\xff" + b"\0" * 64, "not a readable JPEG"),
        (png()[:60], "not a readable PNG"),  # truncated body
        (png_header_claiming(100_000, 100_000), "not a readable PNG"),  # a bomb: refused before any pixel
        (png_header_claiming(5000, 10), "5000x10 pixels"),
        (png(600, 600)[:400], "not a readable PNG"),  # cut inside its pixel data
    ],
)
def test_garbage_truncated_and_oversized_images_are_refused_with_the_reason(data, reason):
    with pytest.raises(ImageRefused, match=reason):
        check_image("build/x.png", data, ImageLimits())


def test_an_image_over_the_byte_limit_is_refused_before_it_is_parsed():
    with pytest.raises(ImageRefused, match="images are sent up to 1000 bytes.*pdftoppm"):
        check_image("build/big.png", png(300, 300) + b"\0" * 2000, ImageLimits(max_bytes=1000))
