"""Executors: where a run's rows are generated. `local` (this process, the default) or `ray` (the
workers of a Ray cluster, imported only when chosen): their table is `registry.EXECUTORS`. Both keep one
writer of the run's store and implement `runner.context.Executor`; the CLI chooses one
(`registry.executor_for`) and hands it to `runner.job.run_job`."""
