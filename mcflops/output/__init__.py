"""Every file mcflops writes, and the only place that writes them: a run's folder (what `mcflops run`
and ``mcflops.run(...).write`` write), the JSON and figures of plan, compare, sensitivity and calibrate, the
shipped calibration fit and a re-rendered report.

- :mod:`.record`: what a run produced, as plain data (:class:`RunRecord`): what every run file is written from
- :mod:`.files`: atomic writes (exclusive temporary files, the folder swap)
- :mod:`.lock`: one writer per folder, leftovers of dead writers removed
- :mod:`.folder`: what a run folder holds and which folders may be replaced
- :mod:`.figures`: which figures each output gets (drawn by plots/)
"""

from mcflops.output.files import WRITTEN, Writer, label, replace_file, replace_text, swap
from mcflops.output.folder import (ANALYSES, FIGURES_MISSING, NETCDF_MISSING, REPORT_FILES, REPORT_KEYS,
                                   REPORT_MARKER, check_out, not_a_report, rerender_report, run_files,
                                   write_analysis, write_compare, write_fit, write_outputs, write_run)
from mcflops.output.lock import FolderBusy, acquire, holding, release
from mcflops.output.record import PlotData, RunRecord

__all__ = ["ANALYSES", "PlotData", "RunRecord", "acquire", "release", "FIGURES_MISSING", "FolderBusy", "NETCDF_MISSING", "REPORT_FILES", "REPORT_KEYS",
           "REPORT_MARKER", "WRITTEN", "Writer", "check_out", "holding", "label", "not_a_report", "replace_file",
           "replace_text", "rerender_report", "run_files", "swap", "write_analysis", "write_compare", "write_fit", "write_outputs",
           "write_run"]
