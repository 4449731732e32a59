"""The common end of every benchmark plot: grid, legend, an atomic PNG write and close."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from capplan.io.files import write_bytes_atomic


def finish_plot(plt: Any, fig: Any, ax: Any, path: Path) -> Path:
    """Draw the grid and legend of ``ax``, write ``fig`` to ``path`` as PNG atomically, close it; return ``path``."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    write_bytes_atomic(path, buf.getvalue())
    plt.close(fig)
    return path
