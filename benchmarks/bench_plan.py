"""Planner: the step-time model fitted to T-Rex's DeepSeek-V4-Pro step (about 27 s, 512 ranks, GBS 1024),
then its error on published runs it was not fitted to (trex_cli/plan/validation.py); and the FLOP
count under which T-Rex's 34.22% MFU is read."""

from __future__ import annotations

import sys


def run(quick: bool = False) -> list[dict]:
    from trex_cli.plan.validation import validate_against_published

    report = validate_against_published()
    rows = [{"benchmark": "plan: calibration", "figure": f"compute_efficiency fitted to {report['fitted_to']}",
             "value": round(report["compute_efficiency"], 4), "unit": "fraction of peak", "baseline": "",
             "baseline_value": "", "ratio": "", "target": "one knob, one figure"}]
    for row in report["runs"]:
        rows.append({"benchmark": f"plan: {row['role']}", "figure": f"{row['name']} step ({row['layout']})",
                     "value": round(row["predicted_step_s"], 2), "unit": "s predicted",
                     "baseline": f"published: {row['measured']}", "baseline_value": round(row["measured_step_s"], 2),
                     "ratio": f"{100 * row['error']:+.1f}% error", "target": "held-out error printed"})
    closest = next(row for row in report["mfu_conventions"] if row["closest"])
    rows.append({"benchmark": "plan: MFU convention", "figure": f"T-Rex's 34.22% read as: {closest['convention']}",
                 "value": round(100 * closest["mfu_at_27s"], 2), "unit": "% at 27 s", "baseline": "paper",
                 "baseline_value": 34.22, "ratio": f"34.22% at {closest['step_for_34_22']:.2f} s", "target": ""})
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
