"""Makes WebP images with PIL (lossless and lossy, with transparent pixels,
odd and even sizes) and records, for each, the RGB pixels AgentChat 0.7.5's Image
sends a model (Image converts to RGB and writes PNG). webp_test.go checks
agentd's conversion against them. Run in the AgentChat environment
(e2e/autogen/README.md), from this directory:

    /work/autogen-env/python.sh webp.py
"""

import base64
import io
import json

from autogen_core import Image
from PIL import Image as PILImage


def gradient(w: int, h: int) -> PILImage.Image:
    im = PILImage.new("RGBA", (w, h))
    for x in range(w):
        for y in range(h):
            im.putpixel((x, y), (50 * x % 256, 60 * y % 256, (200 - 30 * x) % 256, 255 if (x + y) % 3 else 128))
    return im


def noise(w: int, h: int) -> PILImage.Image:
    """Opaque RGB with sharp colour edges everywhere (a fixed sequence)."""
    im = PILImage.new("RGB", (w, h))
    v = 12345
    for y in range(h):
        for x in range(w):
            px = []
            for _ in range(3):
                v = (v * 1103515245 + 12345) % 2**31
                px.append(v >> 23)
            im.putpixel((x, y), tuple(px))
    return im


def webp(im: PILImage.Image, lossless: bool) -> bytes:
    b = io.BytesIO()
    im.save(b, "WEBP", lossless=lossless, quality=90, exact=True)
    return b.getvalue()


out = {}
for name, data in (
    ("lossless", webp(gradient(5, 4), True)),
    ("lossy", webp(gradient(5, 4), False)),
    ("lossy_odd", webp(noise(7, 5), False)),
    ("lossy_even", webp(noise(8, 6), False)),
    ("lossy_one_row", webp(noise(9, 1), False)),
):
    img = Image.from_base64(base64.b64encode(data).decode())
    rgb = img.image.convert("RGB")
    out[name] = {
        "webp": base64.b64encode(data).decode(),
        "width": rgb.width,
        "height": rgb.height,
        "rgb": [list(rgb.getpixel((x, y))) for y in range(rgb.height) for x in range(rgb.width)],
        "data_uri_prefix": img.data_uri[: len("data:image/png;base64,")],
    }
with open("webp.json", "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
