"""The development harness of trainjob-operator, outside the wheel (hack/harness/README.md): the local control plane
(`cluster`), real nodes (`realnodes`, `images`, `realexamples`, `realnode_prebuild`), MultiKueue fleets
(`multikueue`), upstream's controller (`upstream_run`) and the demo (`demo`). Tests, benchmarks and scripts import it
with `hack/` on `sys.path` (pytest's `pythonpath`, or `sys.path.insert`)."""
