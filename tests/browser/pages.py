"""Finding the widget's rows in a page (playwright), for every browser test."""

from __future__ import annotations

from playwright.sync_api import Locator, Page

ROWS = ".nbi-body [role=row]"


def row(page: Page, path: str) -> Locator:
    """The rendered row of a module or tensor path ('' is the root)."""
    return page.locator(f'{ROWS}[data-path="{path}"]')


def visible_paths(page: Page) -> list[str]:
    """The paths of the rows rendered now, top to bottom."""
    return page.locator(ROWS).evaluate_all("rows => rows.map(r => r.dataset.path)")


# WCAG's contrast ratio of an element's text against the first opaque background behind it
# (up through shadow roots); a canvas blends the colours, so any CSS syntax and alpha count
_CONTRAST = """el => {
  const up = (e) => e.parentElement ?? e.getRootNode().host ?? null;
  let back = up(el);
  while (back && ["rgba(0, 0, 0, 0)", "transparent"].includes(getComputedStyle(back).backgroundColor)) back = up(back);
  const ctx = Object.assign(document.createElement("canvas"), { width: 1, height: 1 }).getContext("2d");
  const paint = (colour) => { ctx.fillStyle = colour; ctx.fillRect(0, 0, 1, 1); return [...ctx.getImageData(0, 0, 1, 1).data]; };
  const bg = paint(back ? getComputedStyle(back).backgroundColor : "white");
  const css = getComputedStyle(el);
  const fg = paint(el instanceof SVGElement ? css.fill : css.color);
  const lum = (c) => c.slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""


def contrast(text: Locator) -> float:
    """The contrast ratio (1 to 21) of `text`'s colour against the background it sits on."""
    return float(text.evaluate(_CONTRAST))
