"""Re-run the tutorial notebooks in place so readers see current outputs (`make notebooks`).

Outputs are kept; stored widget state is stripped (nbval compares the outputs, and widget
state would only bloat the files and go stale). Run from the repository root.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).parent


def execute(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)  # timestamps: noise in every diff
    nbformat.write(notebook, path)
    print(f"executed {path.name}")


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(p.name for p in HERE.glob("[0-9]*.ipynb")):
        execute(HERE / name)
