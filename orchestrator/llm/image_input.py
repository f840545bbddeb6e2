"""Images the model may look at: a PNG or JPEG from build/, checked and bounded before it is sent.

The bytes come from a script or the model, so they are hostile until checked: the signature must say PNG or JPEG,
the header must parse (Pillow reads the header only; nothing is decoded), and the size in bytes and in pixels must
stay within the limits. What passes is sent as an OpenAI chat image part (a ``data:`` URL) in a user message, as the
Chat Completions API takes images there and not in tool results.
"""

from __future__ import annotations

import base64
import io
import warnings
from dataclasses import dataclass

from PIL import Image

_SIGNATURES = {b"\x89PNG\r\n\x1a\n": ("PNG", "image/png"), b"\xff\xd8\xff": ("JPEG", "image/jpeg")}


class ImageRefused(ValueError):
    """The file is not an image the model may be shown; the message says why and what to do."""


@dataclass(frozen=True)
class ImageLimits:
    max_bytes: int = 4 * 1024 * 1024
    max_side_px: int = 4096
    max_pixels: int = 16_000_000


@dataclass(frozen=True)
class ViewedImage:
    """A checked image, ready to be attached to the conversation."""

    path: str
    mime: str
    width: int
    height: int
    data: bytes

    @property
    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def content_part(self, detail: str = "auto") -> dict[str, object]:
        return {"type": "image_url", "image_url": {"url": self.data_url, "detail": detail}}


def check_image(path: str, data: bytes, limits: ImageLimits) -> ViewedImage:
    """``data`` as a :class:`ViewedImage`, or :class:`ImageRefused` saying what is wrong and how to fix it."""
    if len(data) > limits.max_bytes:
        raise ImageRefused(
            f"{path} has {len(data)} bytes; images are sent up to {limits.max_bytes} bytes. Render it smaller "
            "(e.g. pdftoppm -r 50 or -scale-to 1024)"
        )
    kind = next((v for sig, v in _SIGNATURES.items() if data.startswith(sig)), None)
    if kind is None:
        raise ImageRefused(f"{path} is not a PNG or JPEG file (its first bytes say otherwise)")
    fmt, mime = kind
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[fmt]) as img:
                width, height = img.size
                _check_size(path, width, height, limits)
                img.load()  # a truncated or corrupt body is refused here, not by the model's API later
    except ImageRefused:
        raise
    except Exception as e:  # noqa: BLE001 - any parse failure of a hostile file is the same refusal
        raise ImageRefused(f"{path} is not a readable {fmt} image ({type(e).__name__})") from e
    return ViewedImage(path=path, mime=mime, width=width, height=height, data=data)


def _check_size(path: str, width: int, height: int, limits: ImageLimits) -> None:
    if width < 1 or height < 1 or max(width, height) > limits.max_side_px or width * height > limits.max_pixels:
        raise ImageRefused(
            f"{path} is {width}x{height} pixels; images are sent up to {limits.max_side_px} px a side and "
            f"{limits.max_pixels} pixels. Render it smaller (e.g. pdftoppm -scale-to 1024)"
        )
