"""The report's planning section: present exactly when summary.json has a plan, with its answers."""

from mcflops.report import Run, build, planning, to_markdown

PLAN = {"name": "x", "seed": 0, "samples": 1000, "prob": 0.9, "distribution": "prior",
        "gpu_hours": {"p5": 1e6, "p25": 2e6, "p50": 3e6, "p75": 4e6, "p90": 5e6, "p95": 6e6, "at_prob": 5e6},
        "count_dependent": ["goodput"], "notes": ["goodput re-solved at every count tried"],
        "deadline": {"days": 90.0, "prob": 0.9, "method": "fixed point", "gpus": 2677, "gpus_p50": 2100,
                     "prob_at_gpus": 0.9004, "prob_one_fewer": 0.8999, "mcse": 0.0007},
        "curve": {"days": 90.0, "gpus": [1000, 2000], "prob": [0.1, 0.5]},
        "cluster": {"gpus": 4096, "days_p50": 30.5, "days_p90": 50.1, "days_at_prob": 50.1,
                    "prob_within_deadline": 0.99},
        "budget_usd": {"budget": 1e8, "prob": 0.9, "tokens": 9.8e12, "tokens_p50": 1.4e13, "usd_per_token_p50": 7e-6}}


def _md(summary):
    return to_markdown(build(Run(summary, None, {}, "folder")))


def test_the_section_states_the_answers():
    md = _md({"name": "x", "plan": PLAN})
    sec = md[md.index("Planning"):]
    for text in ("2,677 accelerators", "2,100 for an even chance", "fixed point", "30.5 days", "9.800T tokens",
                 "P(done within 90 days) = 0.990", "goodput re-solved"):
        assert text in sec, text
    assert sec.index("Planning") < sec.index("Assumptions")


def test_no_plan_no_section():
    assert planning.planning(Run({"name": "x"}, None, {}, "f")) is None
    assert "Planning" not in _md({"name": "x"})


def test_no_count_reaches_p():
    dl = {"days": 90.0, "prob": 0.9, "method": "fixed point", "gpus": None, "gpus_p50": None,
          "best_gpus": 3300, "best_prob": 0.36}
    md = _md({"name": "x", "plan": {**PLAN, "deadline": dl}})
    assert "no accelerator count" in md and "3,300" in md
