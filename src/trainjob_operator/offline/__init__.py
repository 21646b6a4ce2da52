"""The offline CLI (`render`, `validate`, `convert`): what the operator would do with TrainJobs and runtimes read from
files, without a cluster. `inputs` reads files as kubectl does; `check` runs the CRD's rules and the admission review
(`runtime/review.py`, shared with the webhooks); `outcome` builds and says it; `workers` spreads a long input over
forked processes (`forked`, the only module of the package that forks); `convert` rewrites older shapes; `commands`
runs a command end to end. `cli.py` parses the command line and calls `commands.run`."""
