// Manifest-only module: nothing is compiled from it. It pins modules whose
// YAML the harness installs but whose code no binary needs, so their
// content is verified against go.sum like everything else.
//
//   sigs.k8s.io/lws  test/integration/crd/volcano-podgroup.yaml
//                    (copy of Volcano's podgroups.scheduling.volcano.sh CRD;
//                    volcano.sh/volcano itself is not on the module proxy,
//                    and volcano.sh/apis ships no CRDs)
module trainjob-operator.invalid/hack/cluster/manifests

go 1.26.0

require sigs.k8s.io/lws v0.9.0
