"""The data files under reports/data/: the same arrays give the same .npz bytes (a DVC output
must not change when nothing did), and what np.load reads back is what was written."""

from __future__ import annotations

import io

import numpy as np

from ptsl.report.datafiles import LONG_COLUMNS, long_frame, npz_bytes, table_arrays

from . import report_data


def test_an_npz_has_the_same_bytes_every_time_and_loads_back():
    arrays = {"evaluation/mt10_care": np.arange(6.0).reshape(2, 3),
              "tasks": np.asarray(["a-v3", "b-v3", "c-v3"]), "steps": np.arange(3)}
    blob = npz_bytes(arrays)
    assert npz_bytes(arrays) == blob
    loaded = np.load(io.BytesIO(blob))
    assert sorted(loaded.files) == sorted(arrays)
    for key, value in arrays.items():
        assert np.array_equal(loaded[key], value)


def test_a_table_s_arrays_and_the_long_table():
    p = report_data.params(tables=("mt10_1m",))
    recs = report_data.records(p)
    arrays = table_arrays(p, p.tables["mt10_1m"], recs)
    assert arrays["steps"].tolist() == [0, 150, 300, 450, 600]
    assert arrays["tasks"].tolist() == report_data.TASKS
    at = recs.curves[(recs.curves["experiment"] == "mt10_care") & (recs.curves["step"] == 600)]
    assert np.array_equal(arrays["evaluation/mt10_care"],
                          at[[f"success/{t}" for t in report_data.TASKS]].to_numpy())
    assert arrays["training_curves/mt10_care"].shape == (1, 10, 5)
    runs = long_frame(p, recs)
    assert tuple(runs.columns) == LONG_COLUMNS
    assert len(runs) == len(recs.curves) * len(report_data.TASKS)
