"""What scripts/helm-check asserts of the chart's rendered output, beyond kubernetes-validate:

  split OUT_DIR FILE...   each rendered file's documents into OUT_DIR/core-*.yaml (Kubernetes'
                          own kinds) and OUT_DIR/crd-*.yaml (the Prometheus Operator's)
  restricted FILE...      every pod template meets Pod Security "restricted", driftwatch's own
                          containers with a read-only root as well
  rules FILE ALERTS       the rendered PrometheusRule holds exactly ALERTS' rule groups
  dashboard FILE JSON     the rendered dashboard ConfigMap holds exactly the dashboard JSON
  same-shape FILE K8S     the example chart's Deployment has config/k8s/deployment.yaml's shape:
                          the same pod security, the native sidecar with the same probes,
                          resources, args and mounts, at least its container security

Each fails (exit 1) naming the object and what is wrong.
"""
import json
import os
import sys

import yaml

CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}


def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def pod_templates(path):
    for d in docs(path):
        if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            yield f'{d["kind"]}/{d["metadata"]["name"]}', d["spec"]["template"]["spec"]


def split(out_dir, files):
    os.makedirs(out_dir, exist_ok=True)
    for path in files:
        name = os.path.splitext(os.path.basename(path))[0]
        ds = docs(path)
        for kind, keep in (("core", lambda d: d["kind"] not in CRD_KINDS), ("crd", lambda d: d["kind"] in CRD_KINDS)):
            with open(os.path.join(out_dir, f"{kind}-{name}.yaml"), "w") as f:
                yaml.safe_dump_all([d for d in ds if keep(d)], f)


def restricted(files):
    problems = []
    for path in files:
        for name, pod in pod_templates(path):
            psc = pod.get("securityContext", {})
            for c in pod.get("initContainers", []) + pod.get("containers", []):
                where = f"{path}: {name} container {c['name']}"
                sc = c.get("securityContext", {})
                merged = {**psc, **sc}
                if sc.get("allowPrivilegeEscalation") is not False:
                    problems.append(f"{where}: allowPrivilegeEscalation is not false")
                if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                    problems.append(f"{where}: capabilities do not drop ALL")
                if sc.get("privileged"):
                    problems.append(f"{where}: privileged")
                if merged.get("runAsNonRoot") is not True:
                    problems.append(f"{where}: runAsNonRoot is not true")
                if merged.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
                    problems.append(f"{where}: no RuntimeDefault seccomp profile")
                if c["name"] == "driftwatch" and sc.get("readOnlyRootFilesystem") is not True:
                    problems.append(f"{where}: driftwatch's root filesystem is not read-only")
            for v in pod.get("volumes", []):
                if "hostPath" in v:
                    problems.append(f"{path}: {name} mounts hostPath {v['name']}")
            if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
                problems.append(f"{path}: {name} shares a host namespace")
    return problems


def rules(path, alerts):
    want = yaml.safe_load(open(alerts))["groups"]
    found = [d for d in docs(path) if d["kind"] == "PrometheusRule"]
    if len(found) != 1:
        return [f"{path}: {len(found)} PrometheusRules, expected 1"]
    if found[0]["spec"] != {"groups": want}:
        return [f"{path}: PrometheusRule/{found[0]['metadata']['name']} differs from {alerts}"]
    return []


def dashboard(path, board):
    want = json.load(open(board))
    found = [d for d in docs(path) if d["kind"] == "ConfigMap" and "driftwatch.json" in d.get("data", {})]
    if len(found) != 1:
        return [f"{path}: {len(found)} dashboard ConfigMaps, expected 1"]
    if json.loads(found[0]["data"]["driftwatch.json"]) != want:
        return [f"{path}: ConfigMap/{found[0]['metadata']['name']} differs from {board}"]
    return []


def same_shape(path, k8s):
    def deployment(p):
        ds = [d for d in docs(p) if d["kind"] == "Deployment"]
        return ds[0]["spec"]["template"]["spec"]

    got, want = deployment(path), deployment(k8s)
    problems = []
    if got.get("securityContext") != want.get("securityContext"):
        problems.append("the pod's securityContext differs")
    if got.get("enableServiceLinks") != want.get("enableServiceLinks"):
        problems.append("enableServiceLinks differs")
    g, w = got["initContainers"][0], want["initContainers"][0]
    for key in ("name", "restartPolicy", "args", "startupProbe", "livenessProbe", "readinessProbe", "resources", "ports"):
        if g.get(key) != w.get(key):
            problems.append(f"the sidecar's {key} differs: {g.get(key)!r} != {w.get(key)!r}")
    mounts = lambda c: sorted(m["mountPath"] for m in c.get("volumeMounts", []))
    if mounts(g) != mounts(w):
        problems.append(f"the sidecar's mounts differ: {mounts(g)} != {mounts(w)}")
    for key, value in w.get("securityContext", {}).items():
        if g.get("securityContext", {}).get(key) != value:
            problems.append(f"the sidecar's securityContext.{key} differs")
    env = lambda c: sorted(e["name"] for e in c.get("env", []))
    if env(g) != env(w):
        problems.append(f"the sidecar's environment differs: {env(g)} != {env(w)}")
    return [f"{path}: {p}" for p in problems]


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    if what == "split":
        split(args[0], args[1:])
        sys.exit(0)
    problems = {
        "restricted": lambda: restricted(args),
        "rules": lambda: rules(*args),
        "dashboard": lambda: dashboard(*args),
        "same-shape": lambda: same_shape(*args),
    }[what]()
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)
