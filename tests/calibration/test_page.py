"""The calibration page (mcflops/report/calibration.py) and the terminal's table, from a validation whose
"model" is the constant baseline (no sampler): every split's rows, the skipped split's reason, the figures."""

from mcflops import calibration as cal
from mcflops.calibration import baselines as base
from mcflops.calibration.scores import score
from mcflops.calibration.validate import MODELS, SplitResult, Validation, hours_predictive
from tests.calibration.test_validation import _toy


def _data(published=True):
    from mcflops.calibration.results import loo_block, targets

    runs = _toy(published=published)
    results = []
    for s in cal.make_splits(runs):
        r = SplitResult(s, {m: [] for m in MODELS})
        for f, fold in enumerate(s.folds):
            bl = base.fit_baselines(runs, s.weights(runs.n)[f])
            for i in fold.held_out:
                for m in MODELS:
                    pred = bl["constant" if m == "model" else m](i)
                    r.rows[m].append(score(runs.ids[i], fold.label, "reported", runs.log_hours[i],
                                           hours_predictive(runs.log_hours_u1[i], pred)))
        results.append(r)
    v = Validation(results, 1.0, 0, cal.Config())
    data = {"seed": 0, "runs": runs.n, "fit_id": "x", "config": {"covariates": ["moe"], "run_df": None},
            "population": [], "validation": v.to_dict(), "validation_table": v.table(),
            "targets": targets(v.table())}
    data["loo"] = loo_block(data["validation"])
    return data


def test_page_shows_every_split_and_says_why_one_is_missing():
    from mcflops.report.calibration import render

    pages = render(_data(published=False), {"validation_pit.png": _png()})
    md = pages["report.md"]
    assert "| leave one organisation out | **the model** | 7 |" in md
    assert "time split (each year from 2023 from the years before)**: not made: 7 of 7 runs have no published" in md
    assert "MFU x goodput (effective utilization)" in md and "validation_pit.png" in md
    assert 'src="data:image/png;base64,' in pages["report.html"]


def test_targets_compare_with_every_baseline():
    t = _data()["targets"]
    assert set(t) == {"loo", "org", "generation", "time"}
    assert t["loo"]["crps"]["met"] is False  # the "model" here is the constant itself: it cannot beat it


def _png() -> bytes:
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b""))
