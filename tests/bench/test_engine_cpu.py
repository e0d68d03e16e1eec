"""`qualflow bench engine` runs end to end on cpu on one tiny point: the result it writes is in the
results schema and carries the point's roofline share."""

from __future__ import annotations

import json

from qualflow.bench import results
from qualflow.cli import main


def test_a_tiny_engine_run_writes_a_schema_result_with_the_roofline_share(tmp_path):
    out = tmp_path / "results"
    rc = main(
        [
            "bench",
            "engine",
            "--tiny",
            "--points",
            "c1_isl128_osl256",
            "--min-repeats",
            "1",
            "--min-seconds",
            "0.1",
            "--engine-process",
            "off",
            "--skip-equality",
            "--work",
            str(tmp_path / "work"),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    [(path, rec)] = results.runs(out, kind="engine")  # read back through the schema's reader
    assert rec["schema"] == results.SCHEMA and rec["name"] == "async"
    [pt] = rec["points"]
    assert pt["name"] == "c1_isl128_osl256_async"
    limit = pt["roofline"]["output_tok_per_s"]
    assert limit > 0 and pt["share_of_roofline"] == pt["figures"]["output_tok_per_s"] / limit
    detail = json.loads(path.read_text())["detail"]["points"]["c1_isl128_osl256_async"]
    assert detail["pct_of_roofline"] == 100 * pt["share_of_roofline"]
