"""The report's analysis: from a run's stored rows to the report model (report.document).

`build.build_report` pairs each candidate with the control by case, counts per slice, bounds the CFR,
applies the gate and checks isolation and proof of treatment; every other module computes one part of it.
Nothing here renders text (report.render does).
"""
