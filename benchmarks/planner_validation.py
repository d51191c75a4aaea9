"""Print the planner's validation table (docs/planner-validation.md): published decode measurements of real MoE
servers against the roofline ceiling and the expected step (:mod:`truepeak.moe.validation`). CPU only.

    PYTHONPATH=src python3 benchmarks/planner_validation.py
"""

from truepeak.moe.validation import validate
from truepeak.report.plan_expected import validation_table

if __name__ == "__main__":
    print("\n".join(validation_table(validate())))
