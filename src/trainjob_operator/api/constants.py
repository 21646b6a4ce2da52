"""Names, keys and strings of the Kubeflow Trainer v2 API that must match upstream byte for byte."""

from typing import Final

GROUP: Final = "trainer.kubeflow.org"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

TRAINJOB_KIND: Final = "TrainJob"
TRAINING_RUNTIME_KIND: Final = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME_KIND: Final = "ClusterTrainingRuntime"
#: The kinds a `runtimeRef` may name.
RUNTIME_KINDS: Final = (TRAINING_RUNTIME_KIND, CLUSTER_TRAINING_RUNTIME_KIND)
#: The resource (plural) of each of our kinds; the CRD of `KIND` is `<plural>.trainer.kubeflow.org`.
PLURALS: Final = {
    TRAINJOB_KIND: "trainjobs",
    TRAINING_RUNTIME_KIND: "trainingruntimes",
    CLUSTER_TRAINING_RUNTIME_KIND: "clustertrainingruntimes",
}

JOBSET_API_VERSION: Final = "jobset.x-k8s.io/v1alpha2"
JOBSET_KIND: Final = "JobSet"
COSCHEDULING_API_VERSION: Final = "scheduling.x-k8s.io/v1alpha1"
VOLCANO_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"
POD_GROUP_KIND: Final = "PodGroup"

# Server-side apply field manager of every object the operator writes (upstream uses "trainer").
FIELD_MANAGER: Final = "trainer"

DEFAULT_MANAGED_BY: Final = "trainer.kubeflow.org/trainjob-controller"
MULTIKUEUE_MANAGED_BY: Final = "kueue.x-k8s.io/multikueue"

# Labels and annotations.
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
FRAMEWORK_LABEL: Final = "trainer.kubeflow.org/framework"
SUPPORT_LABEL: Final = "trainer.kubeflow.org/support"
SUPPORT_DEPRECATED: Final = "deprecated"
WEBHOOK_VALIDATION_LABEL: Final = "trainer.kubeflow.org/webhook-validation"
COSCHEDULING_POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_NAME_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
JOB_COMPLETION_INDEX_FIELD: Final = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
JOBSET_JOB_INDEX_KEY: Final = "jobset.sigs.k8s.io/job-index"
"""The label and annotation JobSet puts on each Job of a replicated job and its pods: the Job's index (0..replicas-1)."""
JOBSET_JOB_INDEX_FIELD: Final = f"metadata.annotations['{JOBSET_JOB_INDEX_KEY}']"
MAX_NODES_PER_JOB_ANNOTATION: Final = "trainer.kubeflow.org/max-nodes-per-job"
"""On a TrainJob, beyond upstream (issue 37, opt-in): the most trainer pods one Job runs; a larger trainer is cut into
Jobs of at most this many (runtime/plugins/trainer_split.py, docs/usage.md)."""

# Ancestor step values and the container each one must carry.
DATASET_INITIALIZER: Final = "dataset-initializer"
MODEL_INITIALIZER: Final = "model-initializer"
ANCESTOR_TRAINER: Final = "trainer"
NODE: Final = "node"
LAUNCHER: Final = "launcher"
ANCESTOR_CONTAINERS: Final = {
    DATASET_INITIALIZER: DATASET_INITIALIZER,
    MODEL_INITIALIZER: MODEL_INITIALIZER,
    ANCESTOR_TRAINER: NODE,
}
INITIALIZER_VOLUME: Final = "initializer"
STORAGE_URI_ENV: Final = "STORAGE_URI"

# Torch.
TORCH_ENV_NUM_NODES: Final = "PET_NNODES"
TORCH_ENV_NUM_PROC_PER_NODE: Final = "PET_NPROC_PER_NODE"
TORCH_ENV_NODE_RANK: Final = "PET_NODE_RANK"
TORCH_ENV_MASTER_ADDR: Final = "PET_MASTER_ADDR"
TORCH_ENV_MASTER_PORT: Final = "PET_MASTER_PORT"
TORCH_ENV_RDZV_BACKEND: Final = "PET_RDZV_BACKEND"
TORCH_ENV_RDZV_ENDPOINT: Final = "PET_RDZV_ENDPOINT"
TORCH_ENV_RDZV_ID: Final = "PET_RDZV_ID"
TORCH_ENV_MAX_RESTARTS: Final = "PET_MAX_RESTARTS"
TORCH_ENV_RDZV_CONF: Final = "PET_RDZV_CONF"
"""torchrun's rendezvous options (`key=value,...`): a user's are kept; an elastic TrainJob's get `is_host=true`."""
TORCH_RDZV_PORT: Final = 29400
"""torchrun's default c10d rendezvous port (the store every elastic agent serves; the rendezvous Service picks one)."""
KUEUE_QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
ELASTIC_ANNOTATION: Final = "trainer.kubeflow.org/elastic"
"""On an elastic TrainJob's JobSet: the bounds it was built with (JSON), what the scaling decisions read."""
ELASTIC_DEFAULT_MAX_RESTARTS: Final = 3
ELASTIC_DEFAULT_BELOW_MIN_SECONDS: Final = 600
REASON_BELOW_MIN_NODES: Final = "BelowMinNodes"
EVENT_ELASTIC_SCALE_DOWN: Final = "ElasticScaleDown"
EVENT_ELASTIC_SCALE_UP: Final = "ElasticScaleUp"
EVENT_ELASTIC_UNAVAILABLE: Final = "ElasticScalingUnavailable"
EVENT_ELASTIC_RENDEZVOUS_MOVED: Final = "ElasticRendezvousMoved"
TORCH_RESERVED_ENVS: Final = frozenset(
    {
        TORCH_ENV_NUM_NODES,
        TORCH_ENV_NUM_PROC_PER_NODE,
        TORCH_ENV_NODE_RANK,
        TORCH_ENV_MASTER_ADDR,
        TORCH_ENV_MASTER_PORT,
    }
)
CONTAINER_TRAINER_PORT: Final = 29500
TORCHTUNE_COMMAND: Final = ("tune", "run")
TORCHTUNE_IMMUTABLE_CONFIGS: Final = (
    "output_dir",
    "tokenizer.path",
    "checkpointer.checkpoint_dir",
    "tokenizer.merges_file",
)
TORCHTUNE_SUPPORTED_MODELS: Final = ("llama3_2/1B", "llama3_2/3B", "llama3_3/70B", "qwen2_5/1.5B")

# MPI.
MPI_SSH_AUTH_VOLUME: Final = "mpi-ssh-auth"
MPI_HOSTFILE_VOLUME: Final = "mpi-hostfile"
MPI_HOSTFILE_DIR: Final = "/etc/mpi"
MPI_HOSTFILE_NAME: Final = "hostfile"
MPI_SSH_PRIVATE_KEY: Final = "ssh-privatekey"
MPI_SSH_PUBLIC_KEY: Final = "ssh-publickey"
OMPI_ENV_HOSTFILE: Final = "OMPI_MCA_orte_default_hostfile"
OMPI_ENV_KEEP_FQDN: Final = "OMPI_MCA_orte_keep_fqdn_hostnames"
OMPI_ENV_DEFAULT_SLOTS: Final = "OMPI_MCA_orte_set_default_slots"
OMPI_ENV_RSH_ARGS: Final = "OMPI_MCA_plm_rsh_args"
# Open MPI 5 replaced ORTE with PRTE and ignores the OMPI_MCA_orte_* names silently (upstream v2.4, #4029):
# both sets are emitted, each version reads its own.
PRTE_ENV_HOSTFILE: Final = "PRTE_MCA_prte_default_hostfile"
PRTE_ENV_KEEP_FQDN: Final = "PRTE_MCA_prte_keep_fqdn_hostnames"
PRTE_ENV_DEFAULT_SLOTS: Final = "PRTE_MCA_prte_set_default_slots"
PRTE_ENV_SSH_ARGS: Final = "PRTE_MCA_plm_ssh_args"
MPI_SSH_ARGS: Final = "-o ConnectionAttempts=10"
OMPI_RESERVED_ENVS: Final = frozenset(
    {
        OMPI_ENV_HOSTFILE,
        OMPI_ENV_KEEP_FQDN,
        OMPI_ENV_DEFAULT_SLOTS,
        OMPI_ENV_RSH_ARGS,
        PRTE_ENV_HOSTFILE,
        PRTE_ENV_KEEP_FQDN,
        PRTE_ENV_DEFAULT_SLOTS,
        PRTE_ENV_SSH_ARGS,
    }
)

# JAX and XGBoost.
JAX_ENV_NUM_PROCESSES: Final = "JAX_NUM_PROCESSES"
JAX_ENV_PROCESS_ID: Final = "JAX_PROCESS_ID"
JAX_ENV_COORDINATOR_ADDRESS: Final = "JAX_COORDINATOR_ADDRESS"
XGBOOST_ENV_TRACKER_URI: Final = "DMLC_TRACKER_URI"
XGBOOST_ENV_TRACKER_PORT: Final = "DMLC_TRACKER_PORT"
XGBOOST_ENV_TASK_ID: Final = "DMLC_TASK_ID"
XGBOOST_ENV_NUM_WORKER: Final = "DMLC_NUM_WORKER"
XGBOOST_RESERVED_ENVS: Final = (
    XGBOOST_ENV_TRACKER_URI,
    XGBOOST_ENV_TRACKER_PORT,
    XGBOOST_ENV_TASK_ID,
    XGBOOST_ENV_NUM_WORKER,
)

# TensorFlow (ours: v2.3 has no mlPolicy.tensorflow; a runtime opts in with FRAMEWORK_LABEL = TENSORFLOW_FRAMEWORK
# and no other framework policy). TF_CONFIG expands $(TF_TASK_INDEX), so TF_TASK_INDEX must come first in env.
TENSORFLOW_FRAMEWORK: Final = "tensorflow"
TF_ENV_CONFIG: Final = "TF_CONFIG"
TF_ENV_TASK_INDEX: Final = "TF_TASK_INDEX"
TF_RESERVED_ENVS: Final = (TF_ENV_TASK_INDEX, TF_ENV_CONFIG)
TF_WORKER: Final = "worker"

# Conditions (TrainJob status).
CONDITION_SUSPENDED: Final = "Suspended"
CONDITION_COMPLETE: Final = "Complete"
CONDITION_FAILED: Final = "Failed"
REASON_SUSPENDED: Final = "Suspended"
REASON_RESUMED: Final = "Resumed"
REASON_DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
REASON_RUNTIME_NOT_SUPPORTED: Final = "TrainingRuntimeNotSupported"
MESSAGE_SUSPENDED: Final = "TrainJob is suspended"
MESSAGE_RESUMED: Final = "TrainJob is resumed"
MESSAGE_DEADLINE_EXCEEDED: Final = "TrainJob exceeded its active deadline"
REASON_STARTUP_DEADLINE_EXCEEDED: Final = "StartupDeadlineExceeded"
JOBSET_CONDITION_COMPLETED: Final = "Completed"
JOBSET_CONDITION_FAILED: Final = "Failed"

RUNTIME_DEPRECATION_POLICY_URL: Final = (
    "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)

# Beyond upstream: a condition that carries build/apply errors to the TrainJob (removed once the cause is
# fixed, so a healthy job carries no extra condition), and the states of `status.state`.
CONDITION_RECONCILE_FAILED: Final = "ReconcileFailed"
CONDITION_PENDING: Final = "Pending"
"""Beyond upstream: present only while the TrainJob waits for objects under its children's names that are not its
own (runtime/identity.py); removed once they are gone."""
REASON_PREVIOUS_TRAINJOB: Final = "WaitingForPreviousTrainJob"
REASON_NAME_IN_USE: Final = "ChildNameInUse"
REASON_RUNTIME_NOT_FOUND: Final = "RuntimeNotFound"
REASON_INVALID_SNAPSHOT: Final = "InvalidRuntimeSnapshot"
REASON_BUILD_FAILED: Final = "BuildFailed"
REASON_APPLY_FAILED: Final = "ApplyFailed"
EVENT_RESOURCES_CREATION_FAILED: Final = "TrainJobResourcesCreationFailed"
STATE_PENDING: Final = "Pending"
STATE_SUSPENDED: Final = "Suspended"
STATE_RUNNING: Final = "Running"
STATE_COMPLETE: Final = "Complete"
STATE_FAILED: Final = "Failed"
STATE_ERROR: Final = "Error"
STATE_RESTARTING: Final = "Restarting"
STATE_STALLED: Final = "Stalled"
REASON_PROGRESS_STALLED: Final = "ProgressStalled"
"""Stalled (issue 35): the attempt reported progress, then none for longer than progressTimeoutSeconds."""
REASON_NO_FIRST_PROGRESS: Final = "NoFirstProgressReport"
"""Stalled (issue 35): the attempt ran longer than firstProgressTimeoutSeconds without a first report."""
EVENT_STALLED: Final = "TrainJobStalled"

# The TrainJob status server (upstream's `TrainJobStatus` feature; on by default here): what trainer pods get so
# `kubeflow.trainer.update_trainjob_status()` can report progress, and what the server answers.
STATUS_SERVER_PORT: Final = 10443
STATUS_ENV_URL: Final = "KUBEFLOW_TRAINER_SERVER_URL"
STATUS_ENV_CA_CERT: Final = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
STATUS_ENV_TOKEN: Final = "KUBEFLOW_TRAINER_SERVER_TOKEN"
STATUS_MOUNT_PATH: Final = "/var/run/secrets/kubeflow/trainer"
STATUS_TOKEN_VOLUME: Final = "kubeflow-trainer-token"
STATUS_CA_KEY: Final = "ca.crt"
STATUS_TOKEN_FILE: Final = "token"
STATUS_TOKEN_EXPIRY_SECONDS: Final = 3600
STATUS_TLS_CONFIG_SUFFIX: Final = "-tls-config"
STATUS_FIELD_MANAGER: Final = "trainer-status"
STATUS_MAX_BODY_BYTES: Final = 1 << 16
# Pod labels JobSet sets on every pod it creates.
JOBSET_NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL: Final = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_RESTART_ATTEMPT_LABEL: Final = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_REPLICATED_JOB_LABEL: Final = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
JOB_COMPLETION_INDEX_LABEL: Final = "batch.kubernetes.io/job-completion-index"
# Beyond upstream (issue 27): why a TrainJob's pods are not running as they should (`status.reason`), and the
# Warning Events on the TrainJob that name the pod.
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_CRASH_LOOP: Final = "CrashLoopBackOff"
REASON_POD_FAILED: Final = "PodFailed"
EVENT_POD_FAILED: Final = "PodFailed"
EVENT_POD_UNSCHEDULABLE: Final = "PodUnschedulable"
EVENT_POD_CANNOT_START: Final = "PodCannotStart"
# Beyond upstream (issue 13): the restarts a TrainJob had before its current JobSet was created, recorded on that
# JobSet so the count and the remaining maxRestarts budget survive a re-created JobSet and an operator restart.
RESTARTS_BEFORE_ANNOTATION: Final = "trainer.kubeflow.org/restarts-before"

# What the kubeflow SDK's TrainerClient() reads (sdk-contract.md §1): a ConfigMap in the operator namespace with the
# Kubeflow Trainer version served (the chart's publicConfigMap.trainerVersion).
PUBLIC_CONFIGMAP: Final = "kubeflow-trainer-public"
TRAINER_VERSION: Final = "v2.3.0"
