"""The roofline chart: one bar per NPU dispatch, its utilization (roofline cycles /
simulated cycles), written as a PNG with zlib (no plotting library needed).

Green: compute-bound and >= the target; red: compute-bound and below it; blue:
memory-bound (the utilization target does not apply). The grey line is the target,
the top of the frame 1.0. Bars are numbered as the dispatch rows of the table."""
import struct
import zlib
from pathlib import Path

import numpy as np

DIGITS = ["111101101101111", "010110010010111", "111001111100111", "111001111001111",
          "101101111001001", "111100111001111", "111100111101111", "111001001001001",
          "111101111101111", "111101111001111"]   # 3x5 glyphs, row-major
GREEN, RED, BLUE = (40, 160, 60), (210, 50, 40), (60, 100, 200)
GREY, BLACK, WHITE = (150, 150, 150), (0, 0, 0), (255, 255, 255)
PLOT_HEIGHT, BAR, GAP, MARGIN, SCALE = 300, 14, 6, 20, 2


def write_png(path: Path, pixels: np.ndarray) -> None:
    """Writes an 8-bit RGB image (height x width x 3 uint8)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    height, width, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(height))
    path.write_bytes(b"\x89PNG\r\n\x1a\n"
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def draw_number(image: np.ndarray, number: int, x: int, y: int) -> None:
    for k, digit in enumerate(str(number)):
        glyph = np.array([int(b) for b in DIGITS[int(digit)]], bool).reshape(5, 3)
        glyph = glyph.repeat(SCALE, 0).repeat(SCALE, 1)
        left = x + k * 4 * SCALE
        image[y:y + 5 * SCALE, left:left + 3 * SCALE][glyph] = BLACK


def bar_color(row: dict, target: float) -> tuple:
    if not row["compute_bound"]:
        return BLUE
    return GREEN if row["utilization"] >= target else RED


def utilization_chart(rows: list[dict], target: float, path: Path) -> None:
    """`rows`: dispatch rows (utilization, compute_bound) in table order."""
    width = 2 * MARGIN + len(rows) * (BAR + GAP)
    height = PLOT_HEIGHT + 2 * MARGIN + 6 * SCALE * 2
    image = np.full((height, width, 3), WHITE, np.uint8)
    top, bottom = MARGIN, MARGIN + PLOT_HEIGHT
    image[top, MARGIN:width - MARGIN] = BLACK
    image[bottom, MARGIN:width - MARGIN] = BLACK
    target_y = bottom - round(target * PLOT_HEIGHT)
    image[target_y, MARGIN:width - MARGIN:4] = GREY
    for k, row in enumerate(rows):
        x = MARGIN + GAP // 2 + k * (BAR + GAP)
        bar_top = bottom - round(min(row["utilization"], 1.0) * PLOT_HEIGHT)
        image[bar_top:bottom, x:x + BAR] = bar_color(row, target)
        label_y = bottom + 4 + (k % 2) * 6 * SCALE    # alternate rows so labels never touch
        draw_number(image, k, x, label_y)
    write_png(path, image)
