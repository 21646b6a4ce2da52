"""A checker of the Pod Security Standards' `restricted` profile (which includes `baseline`) for a pod spec,
after https://kubernetes.io/docs/concepts/security/pod-security-standards/ (policy version "latest").

`restricted_violations(pod_spec)` returns one line per violated rule (empty: the pod passes). The chart tests
cross-check it against the real API server's PodSecurity admission (tests/chart/test_chart.py).
"""

from __future__ import annotations

from typing import Any

# baseline
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# restricted
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
RESTRICTED_ADD_CAPABILITIES = {"NET_BIND_SERVICE"}
VOLUME_META = {"name"}


def _containers(pod: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for ctr in pod.get(field) or []:
            out.append((f"{field}[{ctr.get('name')}]", ctr))
    return out


def _seccomp_type(sc: dict[str, Any] | None) -> str | None:
    return ((sc or {}).get("seccompProfile") or {}).get("type")


def baseline_violations(pod: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    psc = pod.get("securityContext") or {}
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(host):
            problems.append(f"{host}=true")
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        problems.append("pod hostProcess=true")
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            problems.append(f"volume {volume.get('name')} is hostPath")
    if _seccomp_type(psc) == "Unconfined":
        problems.append("pod seccompProfile Unconfined")
    selinux = psc.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        problems.append("pod seLinuxOptions")
    if (psc.get("appArmorProfile") or {}).get("type") == "Unconfined":
        problems.append("pod appArmorProfile Unconfined")
    for sysctl in psc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            problems.append(f"unsafe sysctl {sysctl.get('name')}")
    for where, ctr in _containers(pod):
        sc = ctr.get("securityContext") or {}
        if sc.get("privileged"):
            problems.append(f"{where} privileged")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            problems.append(f"{where} hostProcess")
        added = set((sc.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPABILITIES:
            problems.append(f"{where} adds capabilities {sorted(added - BASELINE_CAPABILITIES)}")
        for port in ctr.get("ports") or []:
            if port.get("hostPort"):
                problems.append(f"{where} hostPort {port['hostPort']}")
        if _seccomp_type(sc) == "Unconfined":
            problems.append(f"{where} seccompProfile Unconfined")
        selinux = sc.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            problems.append(f"{where} seLinuxOptions")
        if sc.get("procMount", "Default") != "Default":
            problems.append(f"{where} procMount {sc['procMount']}")
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            problems.append(f"{where} appArmorProfile Unconfined")
    return problems


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    problems = baseline_violations(pod)
    psc = pod.get("securityContext") or {}
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - VOLUME_META
        if not kinds <= RESTRICTED_VOLUMES:
            problems.append(f"volume {volume.get('name')} of type {sorted(kinds - RESTRICTED_VOLUMES)}")
    if psc.get("runAsUser") == 0:
        problems.append("pod runAsUser=0")
    pod_non_root = psc.get("runAsNonRoot")
    pod_seccomp = _seccomp_type(psc)
    for where, ctr in _containers(pod):
        sc = ctr.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where} allowPrivilegeEscalation != false")
        non_root = sc.get("runAsNonRoot", pod_non_root)
        if non_root is not True:
            problems.append(f"{where} runAsNonRoot != true")
        if sc.get("runAsUser") == 0:
            problems.append(f"{where} runAsUser=0")
        if (sc.get("seccompProfile") and _seccomp_type(sc) not in ("RuntimeDefault", "Localhost")) or (
            not sc.get("seccompProfile") and pod_seccomp not in ("RuntimeDefault", "Localhost")
        ):
            problems.append(f"{where} seccompProfile not RuntimeDefault/Localhost")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"{where} does not drop ALL capabilities")
        added = set(caps.get("add") or [])
        if added - RESTRICTED_ADD_CAPABILITIES:
            problems.append(f"{where} adds capabilities {sorted(added - RESTRICTED_ADD_CAPABILITIES)}")
    return problems
