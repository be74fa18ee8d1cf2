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
