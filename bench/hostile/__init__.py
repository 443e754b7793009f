"""The hostile battery's parts (`bench/hostile_battery.py` runs them): the case and what it must keep
(`case.py`), the sandbox each case runs in (`sandbox.py`), the forking zygote that runs it (`zygote.py`),
the misbehaving servers (`servers.py`), the summary table (`summary.py`), and one module per family of
hostile inputs: command-line options (`cli_options.py`), spec files and traces (`spec_files.py`),
workloads (`workload_files.py`), run directories (`run_dirs.py`), version skew (`versions.py`),
read-only folders (`read_only.py`), misbehaving servers (`served.py`), secrets in endpoints
(`secret_urls.py`) and sizes (`sizes.py`)."""
