"""Every verdict and outcome envsnap reaches: each one `Literal`, defined here once, with a
constant per word. The words are what envsnap prints, what `--json` holds and what bench
records in snapshots keep, so a word is never changed, only added.

    BenchVerdict    new runs against a baseline's (bench/stats.py compare)
    TrialVerdict    a bisect step or an explain trial, judged against the two endpoints
    Classification  a commit of a bisect: a trial verdict, or not measurable there
    ExplainOutcome  how an explain search ended
    BisectOutcome   how a bisect ended: explain's endings and two of its own
    RerunOutcome    where a restore's rerun landed between the good and the bad runs
"""
from __future__ import annotations

from typing import Final, Literal

BenchVerdict = Literal["regression", "improvement", "same", "can't tell"]
REGRESSION: Final = "regression"
IMPROVEMENT: Final = "improvement"
SAME: Final = "same"
CANT_TELL: Final = "can't tell"   # of every kind below: too noisy, or not measured, to say

TrialVerdict = Literal["good", "bad", "can't tell"]
GOOD: Final = "good"
BAD: Final = "bad"

# Not measurable at that commit (it does not build, the benchmark fails: git bisect's 125).
Classification = Literal[TrialVerdict, "skip"]
SKIP: Final = "skip"

ExplainOutcome = Literal["found", "no regression", "can't tell"]
FOUND: Final = "found"
NO_REGRESSION: Final = "no regression"

# The first three mean the regression is real (BisectReport.regression).
BisectOutcome = Literal["found", "skipped", "can't tell", "no regression",
                        "can't tell at the endpoints"]
ONLY_SKIPPED: Final = "skipped"
ENDS_UNDECIDED: Final = "can't tell at the endpoints"

RerunOutcome = Literal["back to good", "still bad", "part way back", "can't tell"]
BACK_TO_GOOD: Final = "back to good"
STILL_BAD: Final = "still bad"
PART_WAY: Final = "part way back"
