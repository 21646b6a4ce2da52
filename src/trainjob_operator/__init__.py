"""trainjob-operator: the Kubeflow Trainer v2 API (TrainJob, TrainingRuntime, ClusterTrainingRuntime) on kopf."""

__version__ = "0.1.0"
