"""CSV exports: values from the field cannot become spreadsheet formulas, in cells or in headers."""
from __future__ import annotations

import csv
import io

from edgewave.cloud.dashboard.export import to_csv


def test_a_pattern_name_in_the_header_row_is_escaped_like_a_cell():
    """matches.csv heads a column with each pattern's name, which a gateway's config names."""
    text = to_csv((["bucket_start", "=HYPERLINK(\"http://x\")", "+1", "fire"],
                   [["2026-11-28T00:00", "@SUM(A1)", "-2", 3]]))
    header, row = list(csv.reader(io.StringIO(text)))
    assert header == ["bucket_start", "'=HYPERLINK(\"http://x\")", "'+1", "fire"]
    assert row == ["2026-11-28T00:00", "'@SUM(A1)", "'-2", "3"]
