"""`trainjob-operator convert` and older shapes in `validate`/`render`: proposal-era (`kubeflow.org/v2alpha1`,
KEP-2170 drafts) and early `trainer.kubeflow.org/v1alpha1` TrainJobs and runtimes, as pages still show them."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_cli import run, write

from builders import RuntimeBuilder
from trainjob_operator.api import constants as c
from trainjob_operator.api.legacy import SHIPPED_RUNTIMES, RuntimeChoice, choose_runtime

V2ALPHA1 = "kubeflow.org/v2alpha1"
NO_FIELD = "no such field in trainer.kubeflow.org/v1alpha1"
RUNTIMES = Path(__file__).resolve().parents[2] / "runtimes"


def old_trainjob(spec: dict[str, Any], api_version: str = V2ALPHA1, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "TrainJob",
        "metadata": {"name": "torch-ddp", "namespace": "tenant-alpha", **meta},
        "spec": spec,
    }


def new_trainjob(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": "torch-ddp", "namespace": "tenant-alpha"},
        "spec": spec,
    }


@dataclass(frozen=True)
class ConvertCase:
    given: dict[str, Any]
    want: dict[str, Any]
    dropped: list[str] = field(default_factory=list)
    """stderr lines before the summary: `<path>: <reason>`."""


CONVERT_CASES = [
    pytest.param(
        ConvertCase(
            old_trainjob(
                {
                    "trainingRuntimeRef": {"name": "torch-distributed-multi-node"},
                    "trainer": {
                        "image": "docker.io/custom-training",
                        "command": ["torchrun train.py"],
                        "numNodes": 5,
                        "resourcesPerNode": {"requests": {"nvidia.com/gpu": 2}},
                    },
                }
            ),
            new_trainjob(
                {
                    "runtimeRef": {"name": "torch-distributed-multi-node"},
                    "trainer": {
                        "image": "docker.io/custom-training",
                        "command": ["torchrun train.py"],
                        "numNodes": 5,
                        "resourcesPerNode": {"requests": {"nvidia.com/gpu": 2}},
                    },
                }
            ),
        ),
        id="the KEP's torch-ddp example: trainingRuntimeRef becomes runtimeRef, trainer moves as is",
    ),
    pytest.param(
        ConvertCase(
            old_trainjob(
                {
                    "trainingRuntimeRef": {"name": "torch-tune-llama-7b"},
                    "datasetConfig": {
                        "storageUri": "s3://dataset/custom-dataset/yelp-review",
                        "env": [{"name": "SPLIT", "value": "train[:5000]"}],
                    },
                    "modelConfig": {
                        "input": {"storageUri": "hf://meta-llama/Llama-2-7b"},
                        "output": {"storageUri": "s3://trained-model"},
                    },
                }
            ),
            new_trainjob(
                {
                    "runtimeRef": {"name": "torch-tune-llama-7b"},
                    "initializer": {
                        "dataset": {
                            "storageUri": "s3://dataset/custom-dataset/yelp-review",
                            "env": [{"name": "SPLIT", "value": "train[:5000]"}],
                        },
                        "model": {"storageUri": "hf://meta-llama/Llama-2-7b"},
                    },
                }
            ),
            [
                "spec.modelConfig.output: model export has no field in trainer.kubeflow.org/v1alpha1: save the model from "
                "the training code"
            ],
        ),
        id="the KEP's LLM fine-tuning example: dataset and model input move under initializer, output has no home",
    ),
    pytest.param(
        ConvertCase(
            old_trainjob(
                {
                    "runtimeRef": {"name": "rt", "apiGroup": "kubeflow.org", "kind": "TrainingRuntime"},
                    "numNodes": 4,
                    "modelConfig": {
                        "input": {
                            "storageUri": "hf://m",
                            "config": {"torch_dtype": "bfloat16"},
                            "secretRef": {"name": "hf", "namespace": "tenant-alpha"},
                        }
                    },
                    "trainer": {"numProcPerNode": "8", "resourcesPerNode": {"limits": {"cpu": 4}}},
                }
            ),
            new_trainjob(
                {
                    "runtimeRef": {"name": "rt", "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"},
                    "initializer": {"model": {"storageUri": "hf://m", "secretRef": {"name": "hf"}}},
                    "trainer": {"numNodes": 4, "resourcesPerNode": {"limits": {"cpu": 4}}, "numProcPerNode": 8},
                }
            ),
            ["spec.modelConfig.input.config: no such field in an initializer of trainer.kubeflow.org/v1alpha1"],
        ),
        id="the page's shape: spec.numNodes, modelConfig.input.config, string numProcPerNode, old API group",
    ),
    pytest.param(
        ConvertCase(
            old_trainjob(
                {
                    "trainingRuntimeRef": {"name": "rt", "namespace": "elsewhere", "version": "v2alpha1"},
                    "numNodes": 2,
                    "trainer": {"numNodes": 3, "numProcPerNode": "gpu"},
                    "datasetConfig": {"storageUri": "s3://d", "secretRef": {"name": "s", "namespace": "other"}},
                    "modelConfig": {
                        "storageUri": "hf://bert-based-cased",
                        "env": [{"name": "TRANSFORMER_TYPE", "value": "AutoModelForCausalLM"}],
                    },
                    "unknownThing": 1,
                },
                uid="1",
                resourceVersion="7",
            ),
            new_trainjob(
                {
                    "runtimeRef": {"name": "rt", "kind": "TrainingRuntime"},
                    "initializer": {
                        "dataset": {"storageUri": "s3://d", "secretRef": {"name": "s"}},
                        "model": {
                            "storageUri": "hf://bert-based-cased",
                            "env": [{"name": "TRANSFORMER_TYPE", "value": "AutoModelForCausalLM"}],
                        },
                    },
                    "trainer": {"numNodes": 3},
                }
            ),
            [
                "metadata.uid: set by the API server; left out so the object can be created",
                "metadata.resourceVersion: set by the API server; left out so the object can be created",
                "spec.trainingRuntimeRef.namespace: a TrainingRuntime is looked up in the TrainJob's own namespace",
                "spec.trainingRuntimeRef.version: runtimes are served as trainer.kubeflow.org/v1alpha1 only",
                "spec.datasetConfig.secretRef.namespace: the Secret must be in the TrainJob's namespace (secretRef has only "
                "a name)",
                "spec.trainer.numProcPerNode: 'gpu' has no equivalent: trainer.kubeflow.org/v1alpha1 takes a number of "
                "processes (unset = auto)",
                "spec.numNodes: conflicts with spec.trainer.numNodes (3), which is kept",
                f"spec.unknownThing: {NO_FIELD}",
            ],
        ),
        id="everything without a home is named by its path, with the reason",
    ),
    pytest.param(
        ConvertCase(
            old_trainjob(
                {
                    "runtimeRef": {"name": "torch-distributed"},
                    "labels": {"team": "nlp"},
                    "annotations": {"cost-center": "42"},
                    "podSpecOverrides": [
                        {
                            "targetJobs": [{"name": "node"}, {"name": "dataset-initializer"}],
                            "serviceAccountName": "trainer",
                            "nodeSelector": {"pool": "gpu"},
                            "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}], "args": ["x"]}],
                        }
                    ],
                    "suspend": True,
                    "managedBy": "kubeflow.org/trainjob-controller",
                },
                api_version=c.API_VERSION,
            ),
            new_trainjob(
                {
                    "runtimeRef": {"name": "torch-distributed"},
                    "runtimePatches": [
                        {
                            "manager": "trainjob-operator/convert",
                            "trainingRuntimeSpec": {
                                "template": {
                                    "metadata": {"labels": {"team": "nlp"}, "annotations": {"cost-center": "42"}},
                                    "spec": {
                                        "replicatedJobs": [
                                            {
                                                "name": name,
                                                "template": {
                                                    "spec": {
                                                        "template": {
                                                            "spec": {
                                                                "serviceAccountName": "trainer",
                                                                "nodeSelector": {"pool": "gpu"},
                                                                "containers": [
                                                                    {
                                                                        "name": "node",
                                                                        "env": [{"name": "A", "value": "1"}],
                                                                    }
                                                                ],
                                                            }
                                                        }
                                                    }
                                                },
                                            }
                                            for name in ("node", "dataset-initializer")
                                        ]
                                    },
                                }
                            },
                        }
                    ],
                    "suspend": True,
                    "managedBy": "trainer.kubeflow.org/trainjob-controller",
                }
            ),
            [
                "spec.podSpecOverrides[0].containers[0].args: a runtime patch cannot set a container's field in "
                "trainer.kubeflow.org/v1alpha1"
            ],
        ),
        id="early v1alpha1: labels, annotations and podSpecOverrides become one runtime patch per target job",
    ),
    pytest.param(
        ConvertCase(
            old_trainjob(
                {
                    "runtimeRef": {"name": "torch-distributed"},
                    "podTemplateOverrides": [
                        {
                            "targetJobs": [{"name": "node"}],
                            "metadata": {"labels": {"pod": "yes"}},
                            "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}], "hostNetwork": True},
                        }
                    ],
                },
                api_version=c.API_VERSION,
            ),
            new_trainjob(
                {
                    "runtimeRef": {"name": "torch-distributed"},
                    "runtimePatches": [
                        {
                            "manager": "trainjob-operator/convert",
                            "trainingRuntimeSpec": {
                                "template": {
                                    "spec": {
                                        "replicatedJobs": [
                                            {
                                                "name": "node",
                                                "template": {
                                                    "spec": {
                                                        "template": {
                                                            "metadata": {"labels": {"pod": "yes"}},
                                                            "spec": {
                                                                "tolerations": [{"key": "gpu", "operator": "Exists"}]
                                                            },
                                                        }
                                                    }
                                                },
                                            }
                                        ]
                                    }
                                }
                            },
                        }
                    ],
                }
            ),
            [
                "spec.podTemplateOverrides[0].spec.hostNetwork: a runtime patch cannot set it in "
                "trainer.kubeflow.org/v1alpha1"
            ],
        ),
        id="v2.1 podTemplateOverrides keep their pod metadata",
    ),
    pytest.param(
        ConvertCase(
            {
                "apiVersion": V2ALPHA1,
                "kind": "ClusterTrainingRuntime",
                "metadata": {"name": "torch-tune-llama-7b"},
                "spec": {
                    "numNodes": 2,
                    "mlPolicy": {"torch": {"numProcPerNode": 5}},
                    "startupPolicy": {"startupPolicyOrder": "InOrder"},
                    "podGroupSpec": {"minMember": 2},
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {"spec": {"containers": [{"name": "trainer", "image": "pytorch"}]}}
                                }
                            },
                        }
                    ],
                },
            },
            {
                "apiVersion": c.API_VERSION,
                "kind": "ClusterTrainingRuntime",
                "metadata": {"name": "torch-tune-llama-7b"},
                "spec": {
                    "mlPolicy": {"torch": {}, "numNodes": 2},
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": "node",
                                    "template": {
                                        "spec": {
                                            "template": {
                                                "spec": {"containers": [{"name": "trainer", "image": "pytorch"}]}
                                            }
                                        }
                                    },
                                }
                            ],
                            "startupPolicy": {"startupPolicyOrder": "InOrder"},
                        }
                    },
                },
            },
            [
                "spec.mlPolicy.torch.numProcPerNode: removed from the API before v2.3 (numProcPerNode: set "
                "spec.trainer.numProcPerNode on the TrainJob)",
                f"spec.podGroupSpec: {NO_FIELD}",
            ],
        ),
        id="a proposal-era runtime: numNodes into mlPolicy, the inline JobSet spec into template.spec",
    ),
]


@pytest.mark.parametrize("case", CONVERT_CASES)
def test_convert(case: ConvertCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "old.yaml", case.given)
    result = run(capsys, "convert", "-f", path)
    assert result.code == 0, result.err
    assert list(yaml.safe_load_all(result.out)) == [case.want]
    meta = case.given["metadata"]
    label = f"{case.given['kind']} {meta['namespace'] + '/' if 'namespace' in meta else ''}{meta['name']}"
    assert result.err.splitlines() == [
        *case.dropped,
        f"converted: {label} ({path}#1) -> trainer.kubeflow.org/v1alpha1 ({len(case.dropped)} field(s) without a home)",
    ]


def test_convert_passes_current_and_foreign_objects_through(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = new_trainjob({"runtimeRef": {"name": "torch-distributed"}})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    old = old_trainjob({"trainingRuntimeRef": {"name": "torch-distributed"}})
    path = write(tmp_path, "mixed.yaml", current, secret, old)
    result = run(capsys, "convert", "-f", path, "-o", "json")
    assert result.code == 0
    assert json.loads(result.out) == {
        "apiVersion": "v1",
        "kind": "List",
        "items": [current, secret, new_trainjob({"runtimeRef": {"name": "torch-distributed"}})],
    }
    assert result.err.splitlines() == [
        f"unchanged: TrainJob tenant-alpha/torch-ddp ({path}#1): already current",
        f"unchanged: Secret s ({path}#2): not a Trainer object",
        f"converted: TrainJob tenant-alpha/torch-ddp ({path}#3) -> trainer.kubeflow.org/v1alpha1 (0 field(s) without "
        f"a home)",
    ]


def test_converted_proposal_trainjob_validates_and_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = old_trainjob(
        {
            "trainingRuntimeRef": {"name": "torch-distributed"},
            "numNodes": 2,
            "datasetConfig": {"storageUri": "hf://tatsu-lab/alpaca"},
            "trainer": {
                "image": "docker.io/custom-training",
                "command": ["torchrun", "train.py"],
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}},
            },
        }
    )
    converted = run(capsys, "convert", "-f", write(tmp_path, "old.yaml", old))
    new = tmp_path / "new.yaml"
    new.write_text(converted.out)
    runtime = str(RUNTIMES / "torch-distributed.yaml")
    # torch-distributed has no dataset-initializer job: validate says so in the API server's words.
    result = run(capsys, "validate", "-f", str(new), "-r", runtime)
    assert (result.code, result.err.splitlines()[0]) == (
        1,
        (
            'spec.runtimeRef: Invalid value: {"name":"torch-distributed","apiGroup":"trainer.kubeflow.org",'
            '"kind":"ClusterTrainingRuntime"}: must have dataset-initializer job when trainJob is configured with input '
            "datasetConfig"
        ),
    )
    without_dataset = yaml.safe_load(converted.out)
    del without_dataset["spec"]["initializer"]
    result = run(capsys, "render", "-f", write(tmp_path, "ok.yaml", without_dataset), "-r", runtime, "-o", "json")
    assert result.code == 0, result.err
    jobset = next(o for o in json.loads(result.out)["items"] if o["kind"] == "JobSet")
    node = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (node["parallelism"], node["template"]["spec"]["containers"][0]["image"]) == (2, "docker.io/custom-training")


@dataclass(frozen=True)
class LegacyCase:
    trainjobs: list[dict[str, Any]]
    runtimes: list[dict[str, Any]]
    message: str
    """The one stderr line; `{f}`/`{r}` stand for the -f/-r file paths."""


LEGACY_CASES = [
    pytest.param(
        LegacyCase(
            [old_trainjob({"trainingRuntimeRef": {"name": "torch-distributed"}})],
            [],
            "TrainJob tenant-alpha/torch-ddp ({f}#1) is a proposal-era TrainJob (kubeflow.org/v2alpha1: the KEP-2170 "
            "draft API, replaced by trainer.kubeflow.org/v1alpha1 in Kubeflow Trainer v2.0); convert it with "
            "`trainjob-operator convert -f {f}` and use the output",
        ),
        id="a proposal-era TrainJob is named as such, with the convert command",
    ),
    pytest.param(
        LegacyCase(
            [
                old_trainjob(
                    {
                        "runtimeRef": {"name": "torch-distributed"},
                        "datasetConfig": {"storageUri": "hf://d"},
                        "podSpecOverrides": [],
                    },
                    api_version=c.API_VERSION,
                )
            ],
            [],
            "TrainJob tenant-alpha/torch-ddp ({f}#1) is a TrainJob in an older trainer.kubeflow.org/v1alpha1 shape "
            "(fields removed before Kubeflow Trainer v2.3: spec.datasetConfig, spec.podSpecOverrides); convert it with "
            "`trainjob-operator convert -f {f}` and use the output",
        ),
        id="an early v1alpha1 TrainJob is refused instead of silently losing its dataset",
    ),
    pytest.param(
        LegacyCase(
            [new_trainjob({"runtimeRef": {"name": "torch-distributed"}})],
            [
                {
                    "apiVersion": V2ALPHA1,
                    "kind": "ClusterTrainingRuntime",
                    "metadata": {"name": "torch-distributed"},
                    "spec": {"numNodes": 1},
                }
            ],
            "ClusterTrainingRuntime torch-distributed ({r}#1) is a proposal-era ClusterTrainingRuntime "
            "(kubeflow.org/v2alpha1: the KEP-2170 draft API, replaced by trainer.kubeflow.org/v1alpha1 in Kubeflow "
            "Trainer v2.0); convert it with `trainjob-operator convert -f {r}` and use the output",
        ),
        id="a proposal-era runtime in -r is named as such too",
    ),
]


@pytest.mark.parametrize("command", ["validate", "render"])
@pytest.mark.parametrize("case", LEGACY_CASES)
def test_older_shapes_are_named_with_the_way_out(
    case: LegacyCase, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, "jobs.yaml", *case.trainjobs)
    r = write(tmp_path, "runtimes.yaml", *case.runtimes) if case.runtimes else str(RUNTIMES / "torch-distributed.yaml")
    result = run(capsys, command, "-f", f, "-r", r)
    assert (result.code, result.out) == (2, "")
    assert result.err.splitlines() == [f"trainjob-operator: error: {case.message.format(f=f, r=r)}"]


def test_convert_of_an_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "convert", "-f", str(tmp_path / "missing.yaml"))
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"trainjob-operator: error: cannot read {tmp_path / 'missing.yaml'}")


# ------------------------------------------------------------------ an appliable object: runtime, model, initializers


@dataclass(frozen=True)
class ChoiceCase:
    spec: dict[str, Any]
    choices: tuple[RuntimeChoice, ...]
    want: str | None
    why: str = ""


TUNE = frozenset({"dataset", "model"})
CHOICE_CASES = [
    pytest.param(
        ChoiceCase(
            {"trainer": {"image": "docker.io/custom", "command": ["torchrun", "train.py"]}},
            SHIPPED_RUNTIMES,
            "torch-distributed",
            "the trainer's image or command is torch's",
        ),
        id="a torchrun trainer: the PyTorch runtime",
    ),
    pytest.param(
        ChoiceCase(
            {"trainer": {"image": "docker.io/custom"}},
            SHIPPED_RUNTIMES,
            "torch-distributed",
            "the first runtime that may serve it",
        ),
        id="nothing tells: the first (the project's default)",
    ),
    pytest.param(
        ChoiceCase(
            {"trainer": {"command": ["deepspeed", "--hostfile", "/etc/mpi/hostfile", "train.py"]}},
            SHIPPED_RUNTIMES,
            "deepspeed-distributed",
            "the trainer's image or command is deepspeed's",
        ),
        id="a deepspeed command: the DeepSpeed runtime",
    ),
    pytest.param(
        ChoiceCase(
            {
                "initializer": {
                    "dataset": {"storageUri": "hf://tatsu-lab/alpaca"},
                    "model": {"storageUri": "hf://Qwen/Qwen2.5-1.5B-Instruct"},
                }
            },
            SHIPPED_RUNTIMES,
            "torchtune-qwen2.5-1.5b",
            "it has the dataset and model initializer the TrainJob uses; its name matches the model "
            '"hf://Qwen/Qwen2.5-1.5B-Instruct"',
        ),
        id="initializers and a model: the runtime with those jobs whose name names the model",
    ),
    pytest.param(
        ChoiceCase(
            {"initializer": {"model": {"storageUri": "hf://meta-llama/Llama-3-8b"}}},
            SHIPPED_RUNTIMES,
            "torchtune-llama3.2-1b",
            "it has the model initializer the TrainJob uses",
        ),
        id="a model no runtime names: the first with a model initializer",
    ),
    pytest.param(
        ChoiceCase(
            {"trainer": {"command": ["torchrun", "train.py"]}, "initializer": {"dataset": {"storageUri": "s3://d"}}},
            (
                RuntimeChoice("ClusterTrainingRuntime", "plain", framework="torch"),
                RuntimeChoice("TrainingRuntime", "with-data", framework="torch", initializers=frozenset({"dataset"})),
            ),
            "with-data",
            "it has the dataset initializer the TrainJob uses; the trainer's image or command is torch's",
        ),
        id="the framework first, then the initializers: a TrainingRuntime of any namespace serves",
    ),
    pytest.param(
        ChoiceCase({}, (RuntimeChoice("TrainingRuntime", "theirs", namespace="elsewhere"),), None),
        id="a TrainingRuntime of another namespace serves no TrainJob here",
    ),
]


@pytest.mark.parametrize("case", CHOICE_CASES)
def test_a_runtime_is_chosen_for_a_trainjob_that_names_none(case: ChoiceCase) -> None:
    chosen = choose_runtime(new_trainjob(case.spec), case.choices)
    got = (chosen[0].name, chosen[1]) if chosen is not None else None
    assert got == ((case.want, case.why) if case.want else None)


def test_the_shipped_runtimes_are_this_projects() -> None:
    """`convert` suggests from this table when no -r is given: it must say what runtimes/ holds."""
    found = [RuntimeChoice.of(yaml.safe_load(path.read_text())) for path in sorted(RUNTIMES.glob("*.yaml"))]
    assert sorted(found, key=lambda choice: choice.name if choice else "") == sorted(
        SHIPPED_RUNTIMES, key=lambda choice: choice.name
    )
    assert SHIPPED_RUNTIMES[0].name == "torch-distributed"


@dataclass(frozen=True)
class AppliableCase:
    spec: dict[str, Any]
    args: list[str]
    """After `convert -f OLD`; `{r}` is a file of `runtimes`."""
    code: int
    want_spec: dict[str, Any]
    err: list[str]
    """stderr lines; `{f}` the input file, `{r}` the runtimes file."""
    runtimes: list[dict[str, Any]] = field(default_factory=list)


LABEL = "TrainJob tenant-alpha/torch-ddp ({f}#1)"
APPLIABLE_CASES = [
    pytest.param(
        AppliableCase(
            {"modelConfig": {"input": {"config": "hf://meta-llama/Llama-3.2-1B-Instruct"}}},
            [],
            0,
            {
                "runtimeRef": {"name": "torchtune-llama3.2-1b"},
                "initializer": {"model": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"}},
            },
            [
                f"runtime: {LABEL}: no runtime named; spec.runtimeRef is ClusterTrainingRuntime "
                '"torchtune-llama3.2-1b" (it has the model initializer the TrainJob uses; its name matches the model '
                '"hf://meta-llama/Llama-3.2-1B-Instruct"); --runtime NAME names another',
                f"converted: {LABEL} -> trainer.kubeflow.org/v1alpha1 (0 field(s) without a home)",
            ],
        ),
        id="the pages' modelConfig.input.config: hf://... is the model's storageUri; a runtime is named and said",
    ),
    pytest.param(
        AppliableCase(
            {"modelConfig": {"input": {"config": {"torch_dtype": "bfloat16"}}}, "trainer": {"image": "x"}},
            [],
            0,
            {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"image": "x"}},
            [
                f"spec.modelConfig.input.config: {NO_FIELD.replace('in ', 'in an initializer of ')}",
                "spec.modelConfig: no storageUri to load the model from: no model initializer is written (an empty one "
                "would silently take the runtime's own model)",
                f'runtime: {LABEL}: no runtime named; spec.runtimeRef is ClusterTrainingRuntime "torch-distributed" '
                "(the first runtime that may serve it); --runtime NAME names another",
                f"converted: {LABEL} -> trainer.kubeflow.org/v1alpha1 (2 field(s) without a home)",
            ],
        ),
        id="never an empty initializer: a model without a URI is named, not written as model: {}",
    ),
    pytest.param(
        AppliableCase(
            {"datasetConfig": {"storageUri": "hf://tatsu-lab/alpaca"}, "trainer": {"command": ["torchrun", "t.py"]}},
            [],
            0,
            {
                "runtimeRef": {"name": "torch-distributed"},
                "initializer": {"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}},
                "trainer": {"command": ["torchrun", "t.py"]},
            },
            [
                f'runtime: {LABEL}: no runtime named; spec.runtimeRef is ClusterTrainingRuntime "torch-distributed" '
                "(the trainer's image or command is torch's); --runtime NAME names another",
                f'hint: {LABEL}: ClusterTrainingRuntime "torch-distributed" has no dataset-initializer job: name a '
                'runtime that has one such as "torchtune-llama3.2-1b", "torchtune-llama3.2-3b", '
                '"torchtune-qwen2.5-1.5b" (convert --runtime NAME), or delete spec.initializer.dataset and load the '
                "dataset in the training code",
                f"converted: {LABEL} -> trainer.kubeflow.org/v1alpha1 (0 field(s) without a home)",
            ],
        ),
        id="a dataset for a runtime without a dataset initializer: a hint, even without -r",
    ),
    pytest.param(
        AppliableCase(
            {"datasetConfig": {"storageUri": "s3://d"}, "trainer": {"command": ["torchrun", "t.py"]}},
            ["-r", str(RUNTIMES / "torch-distributed.yaml"), "-r", str(RUNTIMES / "torchtune-llama3.2-1b.yaml")],
            1,
            {
                "runtimeRef": {"name": "torch-distributed"},
                "initializer": {"dataset": {"storageUri": "s3://d"}},
                "trainer": {"command": ["torchrun", "t.py"]},
            },
            [
                f'runtime: {LABEL}: no runtime named; spec.runtimeRef is ClusterTrainingRuntime "torch-distributed" '
                "(the trainer's image or command is torch's); --runtime NAME names another",
                f"converted: {LABEL} -> trainer.kubeflow.org/v1alpha1 (0 field(s) without a home)",
                'spec.runtimeRef: Invalid value: {"name":"torch-distributed","apiGroup":"trainer.kubeflow.org",'
                '"kind":"ClusterTrainingRuntime"}: must have dataset-initializer job when trainJob is configured with '
                "input datasetConfig",
                f"invalid: {LABEL}: 1 error(s)",
                f'hint: {LABEL}: ClusterTrainingRuntime "torch-distributed" has no dataset-initializer job: name a '
                'runtime that has one such as "torchtune-llama3.2-1b" (convert --runtime NAME), or delete '
                "spec.initializer.dataset and load the dataset in the training code",
            ],
        ),
        id="with -r the output is checked: not valid against them is exit 1, with the hint",
    ),
    pytest.param(
        AppliableCase(
            {"trainingRuntimeRef": {"name": "old-name"}},
            ["--runtime", "mine", "-r", "{r}"],
            0,
            {"runtimeRef": {"name": "mine", "kind": "TrainingRuntime"}},
            [
                f'runtime: {LABEL}: spec.runtimeRef is TrainingRuntime "mine" (--runtime; it named "old-name")',
                f"converted: {LABEL} -> trainer.kubeflow.org/v1alpha1 (0 field(s) without a home)",
            ],
            [RuntimeBuilder.make(name="mine", namespace=None).ml_policy(num_nodes=1, torch={}).raw()],
        ),
        id="--runtime names the runtime (a TrainingRuntime of the -r files by that name), and says so",
    ),
]


@pytest.mark.parametrize("case", APPLIABLE_CASES)
def test_convert_gives_an_object_a_user_can_apply(
    case: AppliableCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, "old.yaml", old_trainjob(case.spec))
    r = write(tmp_path, "runtimes.yaml", *case.runtimes) if case.runtimes else ""
    result = run(capsys, "convert", "-f", f, *(arg.format(r=r) for arg in case.args))
    assert (result.code, yaml.safe_load(result.out)["spec"]) == (case.code, case.want_spec)
    assert result.err.splitlines() == [line.replace("{f}", f).replace("{r}", r) for line in case.err]


def test_convert_reads_stdin_and_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "old").mkdir()
    write(tmp_path / "old", "a.yaml", old_trainjob({"trainingRuntimeRef": {"name": "torch-distributed"}}))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(yaml.safe_dump(old_trainjob({})).encode())))
    result = run(capsys, "convert", "-f", str(tmp_path / "old"), "-f", "-", "-o", "json")
    assert result.code == 0, result.err
    assert [item["spec"]["runtimeRef"]["name"] for item in json.loads(result.out)["items"]] == [
        "torch-distributed",
        "torch-distributed",
    ]
    assert result.err.splitlines()[-1].startswith("converted: TrainJob tenant-alpha/torch-ddp (STDIN#1) ->")
