"""Reading the reservation model back without PuLP: arrays of a program, in the order given."""

from __future__ import annotations

import numpy as np

from capplan.reserve.readback import program


def test_program_builds_rows_in_csr_form() -> None:
    """Columns keep their order and bounds; each row lists its entries; the objective sums repeated columns."""
    lp = program([("x", 0.0, None, True), ("y", None, 4.0, False)], [("x", 2.0), ("y", 1.0), ("x", 1.0)],
                 [("r1", 1.0, float("inf"), [("x", 1.0), ("y", -1.0)]), ("r2", -float("inf"), 3.0, [("y", 2.0)])])
    assert list(lp.cost) == [3.0, 1.0]
    assert list(lp.lower) == [0.0, -np.inf] and list(lp.upper) == [np.inf, 4.0]
    assert lp.integer is not None and list(lp.integer) == [True, False]
    assert list(lp.starts) == [0, 2, 3] and list(lp.index) == [0, 1, 1] and list(lp.value) == [1.0, -1.0, 2.0]
    assert list(lp.row_lower) == [1.0, -np.inf] and list(lp.row_upper) == [np.inf, 3.0]
    assert tuple(lp.col_names) == ("x", "y") and tuple(lp.row_names) == ("r1", "r2")
