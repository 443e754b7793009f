"""The run directory's format, below both the runner that writes it and the report that reads it.

- `manifest`, `manifest_schema`: the run's identity and inputs (`manifest.json`).
- `store`, `part_index`: the result parts and their sha256 index (`results/`).
- `integrity`: every part checked against the index and its binding; `lock`: one writer per run.
- `hardware`: the machines a run's rows were generated on, as the manifest records them.
"""
