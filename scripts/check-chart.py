#!/usr/bin/env python3
"""Checks the Helm chart and the Dockerfile against the project. Run it through scripts/check-chart,
which prepares the virtualenv (helm-python-sdk: Helm v4's own chart loader, linter and renderer,
no helm binary; kubernetes-validate: the Kubernetes OpenAPI schemas).

One file (about 1,100 lines) on purpose: a flat list of independent cases over one small
render-and-validate harness, run as one script with no package to install or import path to set.

For each values case the chart is linted, rendered, every manifest is validated against the
Kubernetes schemas (strict: unknown fields are errors), and the guarantees the chart promises are
asserted on the rendered objects. Further cases cover the example host chart that includes the
sidecar's named templates, the chart's refusals of bad values, drift between the chart and the
Rust sources (config keys, metric names, version), and the Dockerfile.

One line per case, then "N passed, M failed" (read by CI); exit status 1 on any failure.
With --render-defaults it only prints the chart rendered with its default values, as a JSON array
of manifests (the rolling restart on the chart's timing in tests/it/replicas/chart.rs reads it).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import copy
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "openwop-mcp-sidecar"
EXAMPLE_HOST = ROOT / "helm" / "examples" / "wop-host"
CONFIG_DIR = "/etc/openwop-mcp-sidecar"
STATE_KEY_ENV = "OPENWOP_SIDECAR_STATE_KEY"
RELEASE, NAMESPACE = "ci", "openwop"
# Keys of the sidecar's configuration that the chart writes itself from other values, so the
# values schema leaves them out of `config` on purpose.
CHART_MANAGED_CONFIG_KEYS = {"listen", "tls"}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class Failed(Exception):
    pass


class Case:
    """Collects assertions; a case fails with every message, not only the first."""

    def __init__(self, name: str):
        self.name = name
        self.errors: list[str] = []
        self.notes: list[str] = []
        self.count = 0

    def check(self, cond: bool, msg: str) -> bool:
        self.count += 1
        if not cond:
            self.errors.append(msg)
        return cond

    def eq(self, got, want, what: str) -> bool:
        return self.check(got == want, f"{what}: got {got!r}, want {want!r}")


# ---------------------------------------------------------------------------------------------
# Helpers over rendered manifests


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def parse_manifests(rendered: dict[str, str]) -> list[tuple[str, dict]]:
    docs = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt") or not text.strip():
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append((path, doc))
    return docs


def of_kind(docs, kind):
    return [d for _, d in docs if d.get("kind") == kind]


def one(case: Case, docs, kind, name=None):
    found = [d for d in of_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    case.check(len(found) == 1, f"expected one {kind}{' ' + name if name else ''}, found {len(found)}")
    return found[0] if found else None


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def validate_k8s(case: Case, docs, kube_version: str) -> int:
    """Validates every object against the Kubernetes schemas; returns how many were checked."""
    import kubernetes_validate

    checked = 0
    for path, doc in docs:
        kind = doc.get("kind", "?")
        name = (doc.get("metadata") or {}).get("name", "?")
        try:
            kubernetes_validate.validate(doc, kube_version, strict=True)
            checked += 1
        except kubernetes_validate.SchemaNotFoundError:
            # CRDs (ServiceMonitor): no schema ships with kubernetes-validate; their structure
            # is asserted by the case itself.
            case.check(kind == "ServiceMonitor", f"{path}: no Kubernetes schema for {doc.get('apiVersion')} {kind}")
        except kubernetes_validate.ValidationError as e:
            where = ".".join(str(p) for p in e.path)
            case.check(False, f"{path}: {kind}/{name} invalid at {where or '(root)'}: {e.message}")
        meta = doc.get("metadata") or {}
        # The schemas do not carry the name formats the API server enforces.
        pattern = DNS_LABEL if kind in ("Service", "Namespace") else DNS_SUBDOMAIN
        case.check(bool(pattern.match(meta.get("name", ""))) and len(meta.get("name", "")) <= 63,
                   f"{kind} name {meta.get('name')!r} is not a valid DNS name")
    return checked


# ---------------------------------------------------------------------------------------------
# The guarantees on the sidecar's container, shared by standalone mode and the example host


def check_container(case: Case, pod: dict, c: dict, values: dict, docs, native: bool | None):
    """Asserts on one rendered sidecar container in its pod spec. native: None for standalone."""
    port = values["containerPort"]
    tls = values["tls"]["enabled"]
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (c.get(probe) or {}).get("httpGet") or {}
        case.eq(get.get("path"), path, f"{probe} path")
        case.eq(get.get("scheme"), "HTTPS" if tls else "HTTP", f"{probe} scheme")
        p = get.get("port")
        case.eq(ports.get(p, p), port, f"{probe} port")
    case.check("startupProbe" not in c, "no startupProbe (a native sidecar's would gate the host's containers)")
    # The lame duck outlasts the readiness probe's verdict: a balancer that follows
    # /readyz at the probe's cadence has stopped sending before the listener closes, with at
    # least a second more for the endpoints change to reach kube-proxy and ingress controllers.
    rp = c.get("readinessProbe") or {}
    verdict = rp.get("periodSeconds", 10) * rp.get("failureThreshold", 3) * 1000
    lame = shutdown_of(docs).get("lameDuckMs", 6000)
    case.check(lame >= verdict + 1000,
               f"shutdown.lameDuckMs ({lame}) >= readinessProbe periodSeconds x failureThreshold ({verdict} ms) + 1 s for endpoint propagation")
    case.eq(list(ports.values()), [port], "container ports")

    sc = c.get("securityContext") or {}
    psc = pod.get("securityContext") or {}
    case.check(sc.get("runAsNonRoot") is True or (sc.get("runAsNonRoot") is None and psc.get("runAsNonRoot") is True),
               "runAsNonRoot")
    case.eq(sc.get("readOnlyRootFilesystem"), True, "readOnlyRootFilesystem")
    case.eq(sc.get("allowPrivilegeEscalation"), False, "allowPrivilegeEscalation")
    case.check("ALL" in ((sc.get("capabilities") or {}).get("drop") or []), "capabilities.drop has ALL")
    case.check(not (sc.get("capabilities") or {}).get("add"), "no added capabilities")
    seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    case.eq(seccomp, "RuntimeDefault", "seccompProfile")

    args = c.get("args") or []
    case.check(args[:1] == ["serve"] and "--config" in args and args[args.index("--config") + 1] == f"{CONFIG_DIR}/sidecar.yaml",
               f"args serve --config {CONFIG_DIR}/sidecar.yaml, got {args}")

    if native is None:
        case.check("restartPolicy" not in c, "no restartPolicy on a standalone container")
    elif native:
        case.eq(c.get("restartPolicy"), "Always", "native sidecar restartPolicy")
    else:
        case.check("restartPolicy" not in c, "classic sidecar container has no restartPolicy")

    # Configuration volume: the whole directory (a subPath mount never sees ConfigMap updates).
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    m = mounts.get(CONFIG_DIR)
    if case.check(m is not None, f"config mounted at {CONFIG_DIR}"):
        case.check("subPath" not in m, "config mount has no subPath")
        vol = volumes.get(m["name"], {})
        cm_name = (vol.get("configMap") or {}).get("name")
        case.check(cm_name in {d["metadata"]["name"] for d in of_kind(docs, "ConfigMap")},
                   f"config volume names a rendered ConfigMap ({cm_name})")
    if tls:
        m = mounts.get(values["tls"]["mountPath"])
        if case.check(m is not None, "TLS secret mounted at tls.mountPath"):
            case.eq((volumes.get(m["name"], {}).get("secret") or {}).get("secretName"), values["tls"]["secretName"], "TLS volume secret")
    else:
        case.check(not any("tls" in n for n in volumes), "no TLS volume without tls.enabled")
    for m in c.get("volumeMounts", []):
        case.check(m["name"] in volumes, f"volumeMount {m['name']} has a volume")

    # The requestState key.
    env = {e["name"]: e for e in c.get("env", [])}
    ref = ((env.get(STATE_KEY_ENV) or {}).get("valueFrom") or {}).get("secretKeyRef")
    if case.check(ref is not None, f"{STATE_KEY_ENV} from a secretKeyRef"):
        sk = values["stateKey"]
        secrets = {d["metadata"]["name"]: d for d in of_kind(docs, "Secret")}
        if sk["existingSecret"]:
            case.eq((ref["name"], ref["key"]), (sk["existingSecret"], sk["existingSecretKey"]), "existingSecret wiring")
            case.check(not secrets, f"no Secret rendered with existingSecret, found {sorted(secrets)}")
        else:
            s = secrets.get(ref["name"])
            if case.check(s is not None and ref["key"] in (s.get("data") or {}), f"secretKeyRef {ref} names a rendered Secret key"):
                key = base64.b64decode(s["data"][ref["key"]]).decode()
                case.check(len(key.encode()) >= 16, "state key at least 16 bytes")
                if sk["value"]:
                    case.eq(key, sk["value"], "state key value")


def shutdown_of(docs) -> dict:
    """The rendered sidecar.yaml's shutdown section ({} when absent or unreadable)."""
    for d in of_kind(docs, "ConfigMap"):
        text = (d.get("data") or {}).get("sidecar.yaml")
        if text:
            try:
                return (yaml.safe_load(text) or {}).get("shutdown") or {}
            except yaml.YAMLError:
                return {}
    return {}


def check_state_secret(case: Case, docs):
    """The chart's state-key Secret survives upgrades and uninstalls: every replica,
    old and new, verifies the same requestState tokens."""
    for s in of_kind(docs, "Secret"):
        ann = s["metadata"].get("annotations") or {}
        case.eq(ann.get("helm.sh/resource-policy"), "keep", f"Secret {s['metadata']['name']} has helm.sh/resource-policy: keep")
    src = (CHART / "templates" / "secret.yaml").read_text()
    case.check('lookup "v1" "Secret"' in src, "secret.yaml reads the existing key back with lookup (never regenerated on upgrade)")


def check_config(case: Case, docs, values: dict) -> str | None:
    """Asserts on the ConfigMap's sidecar.yaml; returns its text."""
    cms = [d for d in of_kind(docs, "ConfigMap") if "sidecar.yaml" in (d.get("data") or {})]
    if not case.check(len(cms) == 1, f"one ConfigMap with sidecar.yaml, found {len(cms)}"):
        return None
    text = cms[0]["data"]["sidecar.yaml"]
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as e:
        case.check(False, f"sidecar.yaml is not YAML: {e}")
        return None
    if not case.check(isinstance(cfg, dict), "sidecar.yaml is a mapping"):
        return None
    case.eq(cfg.get("listen"), f"0.0.0.0:{values['containerPort']}", "config listen")
    case.eq(cfg.get("listen"), "0.0.0.0:8080", "config listen (chart default port)")
    want_url = (values.get("config") or {}).get("upstream", {}).get("url") or values["upstream"]["url"]
    case.eq((cfg.get("upstream") or {}).get("url"), want_url, "config upstream.url")
    for k, v in (values.get("config") or {}).items():
        case.check(k in cfg, f"config key {k} from values kept")
    if values["tls"]["enabled"]:
        mp = values["tls"]["mountPath"].rstrip("/")
        case.eq(cfg.get("tls"), {"certFile": f"{mp}/{values['tls']['certKey']}", "keyFile": f"{mp}/{values['tls']['keyKey']}"}, "config tls")
    else:
        case.check("tls" not in cfg, "no tls keys without tls.enabled")
    return text


def config_checksum(text: str) -> str:
    # The ConfigMap holds the helper's output in a block scalar, which adds one final newline.
    return hashlib.sha256(text.rstrip("\n").encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Optional: the real binary's own validation of every rendered configuration


def find_sidecar_bin() -> Path | None:
    if os.environ.get("SIDECAR_BIN"):
        p = Path(os.environ["SIDECAR_BIN"])
        return p if p.is_file() else None
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    for profile in ("debug", "release", "x86_64-unknown-linux-gnu/release"):
        p = target / profile / "openwop-mcp-sidecar"
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def sidecar_check_config(case: Case, binary: Path | None, text: str, label: str):
    if binary is None or text is None:
        return
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "sidecar.yaml"
        f.write_text(text)
        r = subprocess.run([str(binary), "check-config", str(f)], capture_output=True, text=True, timeout=60)
        if r.returncode == 0:
            case.count += 1
            return
        cfg = yaml.safe_load(text)
        if isinstance(cfg, dict) and "tls" in cfg and "tls." in r.stderr and "not a readable file" in r.stderr:
            # The certificate and key exist only where the chart mounts its Secret; here the
            # binary must refuse nothing but those missing files, so check the rest on its own.
            cfg.pop("tls")
            f.write_text(yaml.safe_dump(cfg))
            r2 = subprocess.run([str(binary), "check-config", str(f)], capture_output=True, text=True, timeout=60)
            if r2.returncode == 0:
                case.count += 1
                case.notes.append("tls.* names files that exist only in the pod; the rest of the config validates")
                return
        case.check(False, f"{label}: openwop-mcp-sidecar check-config refused it: {(r.stderr or r.stdout).strip()}")


class DevHost:
    """The in-repo demo host (target/.../openwop-devhost) on a loopback port, started once."""

    def __init__(self, binary: Path):
        self.proc = subprocess.Popen([str(binary), "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.url = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                break
        if self.url is None:
            self.stop()
            raise RuntimeError(f"{binary} did not print its listening line")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_devhost: DevHost | None = None


def devhost_for(binary: Path) -> DevHost:
    global _devhost
    if _devhost is None:
        _devhost = DevHost(binary.parent / "openwop-devhost")
        # Stopped however the run ends (main stops it too).
        atexit.register(_devhost.stop)
    return _devhost


def mcp_tools_list(base: str, host_header: str) -> tuple[int, dict]:
    """A tools/list as an MCP client sends it, with `host_header` as the Host."""
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(base)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest("POST", "/mcp", skip_host=True)
        for k, v in (("Host", host_header), ("Content-Type", "application/json"),
                     ("Accept", "application/json, text/event-stream"),
                     ("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/list"),
                     ("Authorization", "Bearer acme-dev-key"), ("Content-Length", str(len(body)))):
            conn.putheader(k, v)
        conn.endheaders(body)
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, {"raw": text}
    finally:
        conn.close()


def chart_hosts(docs, cfg_text: str) -> list[str]:
    """The names clients use for this deployment: the chart's Service in every DNS form, with
    and without its port, and publicUrl's host. Sidecar mode has no Service of its own; the
    host chart's Service name stands in."""
    hosts = []
    svcs = [d for d in of_kind(docs, "Service")]
    for svc in svcs:
        name, ns = svc["metadata"]["name"], svc["metadata"].get("namespace", NAMESPACE)
        port = svc["spec"]["ports"][0]["port"]
        for n in (name, f"{name}.{ns}", f"{name}.{ns}.svc", f"{name}.{ns}.svc.cluster.local"):
            hosts += [n, f"{n}:{port}"]
    if not svcs:
        hosts += [f"wop-host.{NAMESPACE}.svc.cluster.local:8787", "10.42.0.17:8080"]
    public = ((yaml.safe_load(cfg_text) or {}).get("mount") or {}).get("publicUrl")
    if public:
        hosts.append(public.split("://", 1)[-1].split("/", 1)[0])
    return hosts


def sidecar_serves_chart_hosts(case: Case, binary: Path | None, text: str | None, docs, label: str):
    """The rendered configuration, run by the real binary in front of the demo host,
    answers an MCP tools/list whose Host is the name the deployment gives it."""
    if binary is None or text is None:
        return
    cfg = yaml.safe_load(text)
    # The certificate files exist only in the pod; the listener here is plain HTTP on loopback.
    cfg.pop("tls", None)
    # No balancer watches this process: skip the lame duck so that stopping it below does not
    # wait out shutdown.lameDuckMs (the chart's value is checked against its probes elsewhere).
    cfg.setdefault("shutdown", {})["lameDuckMs"] = 0
    host = devhost_for(binary)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "sidecar.yaml"
        f.write_text(yaml.safe_dump(cfg))
        env = dict(os.environ, **{STATE_KEY_ENV: "check-chart-state-key-0123456789"})
        env.pop("RUST_LOG", None)
        proc = subprocess.Popen([str(binary), "serve", "--config", str(f), "--listen", "127.0.0.1:0",
                                 "--upstream", host.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        try:
            base = None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                if line.startswith("openwop-mcp-sidecar listening on "):
                    base = line.split(" on ", 1)[1].strip()
                    break
            if not case.check(base is not None, f"{label}: the sidecar started with the rendered config"):
                proc.kill()
                case.notes.append(proc.stderr.read()[-2000:])
                return
            for h in chart_hosts(docs, text):
                status, body = mcp_tools_list(base, h)
                ok = status == 200 and isinstance((body.get("result") or {}).get("tools"), list)
                case.check(ok, f"{label}: tools/list with Host {h}: {status} {json.dumps(body)[:300]}")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


# ---------------------------------------------------------------------------------------------
# Cases


def load_values_file(path: Path | None) -> dict:
    return yaml.safe_load(path.read_text()) or {} if path else {}


def chart_case(name: str, values_file: Path | None, kube_version: str, binary: Path | None) -> Case:
    import helm_python as helm

    case = Case(name)
    user = load_values_file(values_file)
    lint = helm.lint(str(CHART), user, strict=True, kube_version=f"v{kube_version}")
    for m in lint.get("messages", []):
        case.check(m["severity"] < 2, f"lint: {m['path']}: {m['error']}")
    for e in lint.get("errors", []) or []:
        case.check(False, f"lint: {e}")

    with helm.Chart.load(str(CHART)) as chart:
        values = chart.merge_values(user)
        rendered = chart.render(user, name=RELEASE, namespace=NAMESPACE, is_install=True)
    values = deep_merge({"tls": {"enabled": False}, "stateKey": {"value": "", "existingSecret": ""}}, values)
    docs = parse_manifests(rendered)
    n_valid = validate_k8s(case, docs, kube_version)
    kinds = sorted({d["kind"] for _, d in docs})

    text = check_config(case, docs, values)
    sidecar_check_config(case, binary, text, "ConfigMap sidecar.yaml")
    sidecar_serves_chart_hosts(case, binary, text, docs, "ConfigMap sidecar.yaml")
    check_state_secret(case, docs)
    mode = values["mode"]

    if mode == "sidecar":
        for kind in ("Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget",
                     "NetworkPolicy", "ServiceMonitor", "ServiceAccount"):
            case.check(not of_kind(docs, kind), f"sidecar mode renders no {kind}")
        case.check(bool(of_kind(docs, "ConfigMap")), "sidecar mode renders the ConfigMap")
        if not values["stateKey"]["existingSecret"]:
            case.check(bool(of_kind(docs, "Secret")), "sidecar mode renders the state-key Secret")
    else:
        dep = one(case, docs, "Deployment")
        if dep:
            pod = dep["spec"]["template"]["spec"]
            pod_labels = dep["spec"]["template"]["metadata"]["labels"]
            ann = dep["spec"]["template"]["metadata"].get("annotations") or {}
            case.check(selects(dep["spec"]["selector"]["matchLabels"], pod_labels), "Deployment selector matches its pods")
            if text is not None:
                case.eq(ann.get("checksum/config"), config_checksum(text), "checksum/config annotation = sha256 of sidecar.yaml")
            cs = [c for c in pod["containers"] if c["name"] == "openwop-mcp-sidecar"]
            if case.check(len(cs) == 1, "one openwop-mcp-sidecar container"):
                check_container(case, pod, cs[0], values, docs, native=None)
            case.check(not pod.get("initContainers"), "no initContainers in standalone mode")
            case.eq(pod.get("automountServiceAccountToken"), False, "no service account token")
            shutdown = shutdown_of(docs)
            drain = shutdown.get("drainTimeoutMs", 30000)
            lame = shutdown.get("lameDuckMs", 6000)
            grace = pod.get("terminationGracePeriodSeconds", 30) * 1000
            pre = (((cs[0].get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}).get("seconds", 0) * 1000 if cs else 0
            case.check(grace > drain + lame + pre, f"terminationGracePeriodSeconds ({grace} ms) > preStop + lameDuckMs + drainTimeoutMs ({drain + lame + pre} ms)")

            svc = one(case, docs, "Service")
            if svc:
                case.check(selects(svc["spec"]["selector"], pod_labels), "Service selects the pods")
                want_port = values["service"].get("port") or (443 if values["tls"]["enabled"] else 80)
                case.eq(svc["spec"]["ports"][0]["port"], want_port, "Service port")
                tp = svc["spec"]["ports"][0]["targetPort"]
                case.check(tp in {p["name"] for p in cs[0]["ports"]} if cs else False, f"Service targetPort {tp} is a container port")
            hpas = of_kind(docs, "HorizontalPodAutoscaler")
            case.eq(len(hpas), 1 if values["autoscaling"]["enabled"] else 0, "HPA rendered iff autoscaling.enabled")
            for h in hpas:
                case.eq(h["spec"]["scaleTargetRef"]["name"], dep["metadata"]["name"], "HPA targets the Deployment")
                case.check("replicas" not in dep["spec"], "no Deployment replicas under an HPA")
            for pdb in of_kind(docs, "PodDisruptionBudget"):
                case.check(selects(pdb["spec"]["selector"]["matchLabels"], pod_labels), "PDB selects the pods")
            case.eq(len(of_kind(docs, "PodDisruptionBudget")), 1 if values["podDisruptionBudget"]["enabled"] else 0, "PDB rendered iff enabled")
            for np in of_kind(docs, "NetworkPolicy"):
                case.check(selects(np["spec"]["podSelector"]["matchLabels"], pod_labels), "NetworkPolicy selects the pods")
                case.eq(sorted(np["spec"]["policyTypes"]), ["Egress", "Ingress"], "NetworkPolicy policyTypes")
            case.eq(len(of_kind(docs, "NetworkPolicy")), 1 if values["networkPolicy"]["enabled"] else 0, "NetworkPolicy rendered iff enabled")
            for sm in of_kind(docs, "ServiceMonitor"):
                ep = sm["spec"]["endpoints"][0]
                case.eq(ep.get("path"), "/metrics", "ServiceMonitor path")
                case.eq(ep.get("scheme"), "https" if values["tls"]["enabled"] else "http", "ServiceMonitor scheme")
                if svc:
                    case.eq(ep.get("port"), svc["spec"]["ports"][0]["name"], "ServiceMonitor port is the Service's")
                    case.check(selects(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]), "ServiceMonitor selects the Service")
            case.eq(len(of_kind(docs, "ServiceMonitor")), 1 if values["serviceMonitor"]["enabled"] else 0, "ServiceMonitor rendered iff enabled")
        sas = of_kind(docs, "ServiceAccount")
        for sa in sas:
            case.eq(sa.get("automountServiceAccountToken"), False, "ServiceAccount automount off")
    for cm in of_kind(docs, "ConfigMap"):
        for k, v in (cm.get("data") or {}).items():
            if k.endswith(".json"):
                try:
                    json.loads(v)
                    case.count += 1
                except ValueError as e:
                    case.check(False, f"ConfigMap {cm['metadata']['name']} {k} is not JSON: {e}")
    case.summary = f"{mode}, {len(docs)} objects ({', '.join(kinds)}), {n_valid} schema-valid for Kubernetes {kube_version}"
    return case


def example_host_case(native: bool, kube_version: str, binary: Path | None = None) -> Case:
    """Renders helm/examples/wop-host with this chart as its dependency, as a host team would."""
    import helm_python as helm

    case = Case(f"example host chart ({'native sidecar' if native else 'classic container'})")
    with tempfile.TemporaryDirectory() as d:
        host = Path(d) / "wop-host"
        shutil.copytree(EXAMPLE_HOST, host)
        # What `helm dependency build` would put there, without an archive or a lock file.
        shutil.copytree(CHART, host / "charts" / "openwop-mcp-sidecar")
        user = {"mcpSidecar": {"sidecar": {"native": native}}}
        lint = helm.lint(str(host), user, strict=True, kube_version=f"v{kube_version}")
        for m in lint.get("messages", []):
            case.check(m["severity"] < 2, f"lint: {m['path']}: {m['error']}")
        with helm.Chart.load(str(host)) as chart:
            rendered = chart.render(user, name=RELEASE, namespace=NAMESPACE, is_install=True)
            host_values = chart.merge_values(user)["mcpSidecar"]
        # merge_values does not apply dependency aliases; the subchart's own defaults under the
        # host's mcpSidecar values are what its templates saw.
        with helm.Chart.load(str(CHART)) as sub:
            values = sub.merge_values(host_values)
    docs = parse_manifests(rendered)
    n_valid = validate_k8s(case, docs, kube_version)
    values = deep_merge({"tls": {"enabled": False}}, values)
    text = check_config(case, docs, values)
    sidecar_serves_chart_hosts(case, binary, text, docs, "host chart's sidecar.yaml")
    deps = of_kind(docs, "Deployment")
    case.eq([d["metadata"]["name"] for d in deps], [f"{RELEASE}-wop-host"], "only the host's Deployment")
    if deps:
        pod = deps[0]["spec"]["template"]["spec"]
        where = pod.get("initContainers" if native else "containers") or []
        other = pod.get("containers" if native else "initContainers") or []
        cs = [c for c in where if c["name"] == "openwop-mcp-sidecar"]
        case.check(len(cs) == 1, f"sidecar in {'initContainers' if native else 'containers'}")
        case.check(not any(c["name"] == "openwop-mcp-sidecar" for c in other), "sidecar rendered once")
        if cs:
            check_container(case, pod, cs[0], values, docs, native=native)
        ann = deps[0]["spec"]["template"]["metadata"].get("annotations") or {}
        if text is not None:
            case.eq(ann.get("checksum/openwop-mcp-sidecar-config"), config_checksum(text), "host pod carries the config checksum")
        svc = one(case, docs, "Service")
        if svc:
            case.eq(svc["spec"]["ports"][0]["targetPort"], values["containerPort"], "host Service targets the sidecar's port by number")
    case.summary = f"{len(docs)} objects, {n_valid} schema-valid for Kubernetes {kube_version}"
    return case


def refusals_case() -> Case:
    """Values the chart must refuse, with the refusal naming the problem."""
    import helm_python as helm

    case = Case("refusals of bad values")
    bad = [
        ({"config": {"mount": {"pth": "/mcp"}}}, "pth"),
        ({"config": {"listen": "0.0.0.0:9090"}}, "listen"),
        ({"config": {"tls": {"certFile": "/x"}}}, "tls"),
        ({"mode": "daemonset"}, "mode"),
        ({"stateKey": {"value": "too-short"}}, "stateKey"),
        ({"tls": {"enabled": True}}, "tls.secretName"),
        ({"tls": {"enabled": True, "secretName": "s", "mountPath": "/etc/openwop-mcp-sidecar/tls"}}, "tls.mountPath"),
        ({"terminationGracePeriodSeconds": 30}, "terminationGracePeriodSeconds"),
        ({"config": {"shutdown": {"drainTimeoutMs": 60000}}}, "terminationGracePeriodSeconds"),
        ({"config": {"shutdown": {"lameDuckMs": 20000}}}, "lameDuckMs"),
        ({"config": {"logging": {"format": "xml"}}}, "format"),
        ({"config": {"mcp": {"mrtrMaxRounds": 17}}}, "mrtrMaxRounds"),
        ({"autoscaling": {"enabled": True, "targetCPUUtilizationPercentage": None}}, "autoscaling"),
    ]
    with helm.Chart.load(str(CHART)) as chart:
        for values, word in bad:
            try:
                chart.render(values, name=RELEASE, namespace=NAMESPACE)
                case.check(False, f"rendered {values}, want a refusal naming {word}")
            except (helm.HelmValuesError, helm.HelmRenderError) as e:
                case.check(word in str(e), f"refusal of {values} does not name {word}: {str(e).strip()[:200]}")
    case.summary = f"{len(bad)} bad values sets refused by schema or template"
    return case


def raw_config_keys() -> dict:
    """The configuration's key tree from the Raw* structs in src/config/*.rs, one file per
    section (serde rename_all camelCase; a field's own `#[serde(rename = "…")]` wins). A field
    read by hand names its Raw* type in `#[schemars(with = "…")]`; an untagged Raw* enum (a
    word or an object) has the keys of its struct variants."""
    src = "\n".join(f.read_text() for f in sorted((ROOT / "src" / "config").rglob("*.rs")))
    structs = {}
    for m in re.finditer(r"pub struct (\w+)\s*\{(.*?)\n\}", src, re.S):
        fields = {}
        rename = None
        with_raw = None
        for line in m.group(2).splitlines():
            r = re.search(r'rename\s*=\s*"([^"]+)"', line)
            if line.strip().startswith("#[") and r:
                rename = r.group(1)
                continue
            w = re.search(r'schemars\(\s*with\s*=\s*"[^"]*?\b(Raw\w+)', line)
            if line.strip().startswith("#[") and w:
                with_raw = w.group(1)
                continue
            f = re.match(r"^\s*pub (\w+):\s*([^\n]+?),?\s*$", line)
            if not f:
                continue
            camel = rename or re.sub(r"_([a-z])", lambda x: x.group(1).upper(), f.group(1))
            rename = None
            inner = re.findall(r"\bRaw\w+", f.group(2))
            fields[camel] = inner[0] if inner else with_raw
            with_raw = None
        structs[m.group(1)] = fields
    enums = {
        m.group(1): re.findall(r"\b\w+\((Raw\w+)\)", m.group(2))
        for m in re.finditer(r"pub enum (Raw\w+)\s*\{(.*?)\n\}", src, re.S)
    }

    def tree(name):
        if name in enums:
            merged = {}
            for v in enums[name]:
                merged.update(tree(v) or {})
            return merged or None
        return {k: (tree(t) if t and (t in structs or t in enums) else None) for k, t in structs[name].items()}

    return tree("RawConfig")


def schema_config_keys(node: dict):
    """The schema's key tree; lists and maps descend into their element, as the Rust side
    names the element struct."""
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        return schema_config_keys(node["items"])
    if node.get("type") == "object" and "properties" in node:
        return {k: schema_config_keys(v) for k, v in node["properties"].items()}
    if node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
        return schema_config_keys(node["additionalProperties"])
    alts = (node.get("anyOf") or []) + (node.get("oneOf") or [])
    if alts:
        # A word or an object (`none` or `{name, value}`), a switch or an object (`retry`):
        # the object alternatives' keys.
        merged = {}
        for alt in alts:
            merged.update(schema_config_keys(alt) or {})
        return merged or None
    return None


def schema_enums(node: dict, root: dict) -> dict:
    """Every `enum` (or `oneOf` of `const`s) in a schema by dotted path; `*` for a map's value
    and `[]` for a list's element."""
    out = {}

    def deref(n):
        seen = 0
        while "$ref" in n and seen < 8:
            target = root
            for part in n["$ref"].lstrip("#/").split("/"):
                target = target[part]
            n, seen = target, seen + 1
        return n

    def words(n):
        if "enum" in n:
            return [w for w in n["enum"] if w is not None]
        alts = n.get("oneOf")
        if isinstance(alts, list) and alts and all("const" in a for a in alts):
            return [a["const"] for a in alts]
        return None

    def walk(n, p):
        if not isinstance(n, dict):
            return
        n = deref(n)
        w = words(n)
        if w is not None and p:
            out[p] = w
            return
        for alt in n.get("anyOf", []) + (n.get("oneOf", []) if w is None else []):
            walk(alt, p)
        for k, v in n.get("properties", {}).items():
            walk(v, f"{p}.{k}" if p else k)
        if isinstance(n.get("items"), dict):
            walk(n["items"], f"{p}[]")
        if isinstance(n.get("additionalProperties"), dict):
            walk(n["additionalProperties"], f"{p}.*")

    walk(node, "")
    return out


def drift_case() -> Case:
    case = Case("chart vs sources")
    schema = json.loads((CHART / "values.schema.json").read_text())
    raw = raw_config_keys()
    for k in CHART_MANAGED_CONFIG_KEYS:
        raw.pop(k, None)
    sch = schema_config_keys(schema["properties"]["config"])

    def walk(a, b, path):
        for k in sorted(set(a or {}) | set(b or {})):
            p = f"{path}.{k}" if path else k
            if k not in (b or {}):
                case.check(False, f"config.{p} is in src/config/ but not in values.schema.json")
            elif k not in (a or {}):
                case.check(False, f"config.{p} is in values.schema.json but not in src/config/")
            else:
                case.count += 1
                if isinstance(a[k], dict) or isinstance(b[k], dict):
                    walk(a[k], b[k], p)

    walk(raw, sch, "")

    # Every example config key is one the schema accepts (and so one the chart can set).
    example = yaml.safe_load((ROOT / "config" / "sidecar.example.yaml").read_text())
    for k in CHART_MANAGED_CONFIG_KEYS:
        example.pop(k, None)

    def walk_example(e, s, path):
        for k, v in e.items():
            p = f"{path}.{k}" if path else k
            # A map's keys are the user's own (`probe.query`, `statuses`): not descended.
            if case.check(k in (s or {}), f"config/sidecar.example.yaml key {p} missing from values.schema.json") and isinstance(v, dict) and isinstance(s[k], dict):
                walk_example(v, s[k], p)

    walk_example(example, sch, "")

    # One-word fields list the same words in both schemas (the sidecar's is generated from the
    # enums it parses into, so the chart cannot accept a value check-config refuses).
    sidecar = json.loads((ROOT / "config" / "sidecar.schema.json").read_text())
    want, got = schema_enums(sidecar, sidecar), schema_enums(schema["properties"]["config"], schema)
    for k in CHART_MANAGED_CONFIG_KEYS:
        want = {p: w for p, w in want.items() if p != k and not p.startswith(f"{k}.")}
    for p in sorted(set(want) | set(got)):
        case.eq(sorted(got.get(p, [])), sorted(want.get(p, [])), f"config.{p} words (values.schema.json vs config/sidecar.schema.json)")

    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    version = cargo.get("workspace", {}).get("package", {}).get("version") or cargo["package"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    case.eq(chart["appVersion"], version, "Chart.yaml appVersion = Cargo.toml version")

    # The dashboard queries only metrics and labels the sidecar exports.
    tel = (ROOT / "src" / "obs" / "metrics.rs").read_text()
    prefix = re.search(r'Registry::with_prefix\("(\w+)"\)', tel).group(1)
    names = set()
    for n in re.findall(r'\.register\(\s*"(\w+)"', tel):
        names |= {f"{prefix}_{n}", f"{prefix}_{n}_total"}
    labels = set(re.findall(r"^\s*pub (\w+): String,", tel, re.M)) | {"namespace", "pod", "instance", "job", "service"}
    dash = json.loads((CHART / "dashboards" / "openwop-mcp-sidecar.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v.get("definition", "") for v in dash["templating"]["list"]]
    for e in exprs:
        for metric in re.findall(rf"\b{prefix}_\w+", e):
            case.check(metric in names, f"dashboard queries {metric}, which src/obs/metrics.rs does not export")
        used = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"", e))
        for grp in re.findall(r"\bby\s*\(([^)]*)\)", e):
            used |= {x.strip() for x in grp.split(",") if x.strip()}
        for lab in re.findall(r"label_values\([^,]+,\s*(\w+)\)", e):
            used.add(lab)
        for lab in used:
            case.check(lab in labels, f"dashboard uses label {lab!r}, which the sidecar's metrics do not carry")
    case.check(len(exprs) > 0, "dashboard has queries")
    case.summary = "config keys, example config, appVersion and dashboard metrics match the sources"
    return case


# ---------------------------------------------------------------------------------------------
# Dockerfile


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out, buf = [], ""
    for line in text.splitlines():
        s = line.strip()
        if not buf and (not s or s.startswith("#")):
            continue
        if buf and s.startswith("#"):
            continue
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        buf += s
        ins, _, rest = buf.partition(" ")
        out.append((ins.upper(), rest.strip()))
        buf = ""
    return out


def dockerignore_included(rel: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or one of its parent
    directories decides; '!' re-includes."""
    parts = rel.split("/")
    included = True
    for pat in patterns:
        neg = pat.startswith("!")
        p = pat[1:] if neg else pat
        p = os.path.normpath(p.strip("/")) if p.strip("/") else p
        if any(fnmatch.fnmatchcase("/".join(parts[:i]), p) and _no_slash_cross(p, "/".join(parts[:i])) for i in range(1, len(parts) + 1)):
            included = neg
    return included


def _no_slash_cross(pattern: str, path: str) -> bool:
    # Go's filepath.Match: '*' and '?' never match '/'; fnmatch's do, so compare segment counts.
    return "**" in pattern or pattern.count("/") == path.count("/")


def dockerfile_case(binary: Path | None) -> Case:
    case = Case("Dockerfile")
    text = (ROOT / "Dockerfile").read_text()
    ins = dockerfile_instructions(text)
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    bins = {b["name"]: b for b in cargo.get("bin", [])}
    members = cargo.get("workspace", {}).get("members", ["."])
    ignore = [l.strip() for l in (ROOT / ".dockerignore").read_text().splitlines() if l.strip() and not l.strip().startswith("#")]

    args = {}
    for i, a in ins:
        if i == "ARG" and "=" in a:
            k, v = a.split("=", 1)
            args[k] = v
    expand = lambda s: re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), s)

    # Stages.
    stages, cur = [], None
    for i, a in ins:
        if i == "FROM":
            m = re.match(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", a, re.I)
            cur = {"image": expand(m.group(1)), "name": m.group(2), "ins": [], "workdir": "/"}
            stages.append(cur)
        elif cur is not None:
            cur["ins"].append((i, a))
            if i == "WORKDIR":
                cur["workdir"] = a if a.startswith("/") else os.path.join(cur["workdir"], a)
    if not case.check(len(stages) >= 2, "multi-stage build"):
        case.summary = "unparseable"
        return case
    build, final = stages[0], stages[-1]
    case.check(build["image"].startswith("rust:") and "bookworm" in build["image"], f"builder is rust:*bookworm, got {build['image']}")
    case.check(final["image"] == "scratch" or (final["image"].startswith("gcr.io/distroless/static-debian12") and final["image"].endswith(":nonroot")),
               f"runtime is scratch or distroless static-debian12:nonroot (the binary is static), got {final['image']}")

    # The build command: a static release build for an explicit target.
    builds = [a for i, a in build["ins"] if i == "RUN" for a in [a] if "cargo build" in a]
    case.check(len(builds) >= 1, "builder runs cargo build")
    bin_name = triple = None
    for run in builds:
        cmd = run[run.index("cargo build"):].split("&&")[0].split()
        case.check("--release" in cmd, f"cargo build --release: {' '.join(cmd)}")
        case.check("--locked" in cmd, f"cargo build --locked: {' '.join(cmd)}")
        if case.check("--target" in cmd, f"cargo build --target <triple> (a static build needs one): {' '.join(cmd)}"):
            t = cmd[cmd.index("--target") + 1]
            case.check(triple in (None, t), "every cargo build builds the same target")
            triple = t
        # The image carries no demo host (Cargo.toml's `demo` feature, on by default).
        feats = cmd[cmd.index("--features") + 1] if "--features" in cmd[:-1] else ""
        case.check("--no-default-features" in cmd and "--all-features" not in cmd and "demo" not in feats,
                   f"cargo build --no-default-features without the demo feature: {' '.join(cmd)}")
        if case.check("--bin" in cmd, f"cargo build --bin: {' '.join(cmd)}"):
            b = cmd[cmd.index("--bin") + 1]
            case.check(b in bins, f"--bin {b} is a [[bin]] of Cargo.toml ({sorted(bins)})")
            case.check(bin_name in (None, b), "every cargo build builds the same binary")
            bin_name = b
    rustflags = ""
    for i, a in build["ins"]:
        if i in ("ENV", "ARG"):
            case.check(not re.search(r"CARGO_TARGET_DIR|CARGO_BUILD_TARGET", a), f"{i} {a} would move the binary out of target/<triple>/release")
            m = re.match(r'RUSTFLAGS[= ]"?([^"]*)"?', a)
            if m:
                rustflags = m.group(1).strip()
    if triple and triple.endswith("-linux-gnu"):
        case.check("target-feature=+crt-static" in rustflags, f"a -linux-gnu build is static only with RUSTFLAGS +crt-static, got {rustflags!r}")

    # CI builds the same release: scripts/bench (run by .ci/run) builds the same binary for the
    # same target with the same flags, and the image measurement below reads that build.
    bench = (ROOT / "scripts" / "bench").read_text()
    bench_cmd = " ".join(l.strip().rstrip("\\") for l in bench.splitlines() if not l.strip().startswith("#"))
    case.check(f'RUSTFLAGS="{rustflags}"' in bench_cmd, f"scripts/bench builds with the Dockerfile's RUSTFLAGS ({rustflags})")
    case.check(f"triple={triple}" in bench_cmd and '--target "$triple"' in bench_cmd,
               f"scripts/bench builds --target {triple}")
    case.check(re.search(r"cargo build --release --locked --no-default-features .*-p " + re.escape(bin_name or "?"), bench_cmd) is not None,
               f"scripts/bench runs cargo build --release --locked --no-default-features ... -p {bin_name}")

    # The demo host stays out of the image: the members only the `demo` feature pulls in
    # (`dep:` entries of [features].demo) are neither copied nor in the context, and the
    # image's build graph (cargo tree with the Dockerfile's flags) does not contain them.
    deps = cargo.get("dependencies", {})
    demo_only = {}
    for f in cargo.get("features", {}).get("demo", []):
        if f.startswith("dep:") and isinstance(deps.get(f[4:]), dict) and "path" in deps[f[4:]]:
            demo_only[f[4:]] = os.path.normpath(deps[f[4:]]["path"])
    case.check("demo" not in cargo.get("features", {}).get("default", ["demo"]) or demo_only,
               "Cargo.toml's `demo` feature names the demo host (dep:openwop-devhost)")
    for name, path in demo_only.items():
        for st in stages:
            for i, a in st["ins"]:
                if i == "COPY" and not a.startswith("--from="):
                    srcs = [p for p in a.split() if not p.startswith("--")][:-1]
                    case.check(not any(os.path.normpath(x).startswith(f"{path}/src") or os.path.normpath(x) == path for x in srcs),
                               f"the Dockerfile copies no demo host sources ({path}/src): COPY {a}")
        case.check(not dockerignore_included(f"{path}/src/lib.rs", ignore), f".dockerignore keeps {path}/src out of the context")
    pkg = cargo.get("package", {}).get("name", "?")
    try:
        tree = subprocess.run(["cargo", "tree", "--locked", "-p", pkg, "--no-default-features", "-e", "normal,build",
                               "--target", triple or "?", "--prefix", "none", "--format", "{p}"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        if case.check(tree.returncode == 0, f"cargo tree of the image build: {tree.stderr.strip()[-500:]}"):
            names = {l.split()[0] for l in tree.stdout.splitlines() if l.strip()}
            for name in demo_only:
                case.check(name not in names, f"the image build ({pkg} --no-default-features) does not depend on {name}")
    except FileNotFoundError:
        case.notes.append("no cargo on PATH: the image build's dependency graph is not checked")

    # Each workspace member's manifest is in place before the first cargo build.
    first_build = next((n for n, (i, a) in enumerate(build["ins"]) if i == "RUN" and "cargo build" in a), len(build["ins"]))
    copied_before = " ".join(a for i, a in build["ins"][:first_build] if i == "COPY")
    for m in members:
        manifest = "Cargo.toml" if m == "." else f"{m}/Cargo.toml"
        case.check(manifest in copied_before.split() or (m == "." and "Cargo.toml" in copied_before),
                   f"workspace member manifest {manifest} is copied before the first cargo build")
    case.check("Cargo.lock" in copied_before, "Cargo.lock is copied before the first cargo build (--locked)")

    # The binary's path and the entrypoint.
    copies = [a for i, a in final["ins"] if i == "COPY"]
    from_build = [a for a in copies if a.startswith("--from=")]
    want_src = os.path.join(build["workdir"], "target", triple or "?", "release", bin_name or "?")
    dest_bin = None
    for a in from_build:
        parts = a.split()
        src, dest = parts[1], parts[-1]
        case.check(parts[0] in (f"--from={build['name']}", "--from=0"), f"COPY {a} comes from the build stage")
        case.eq(src, want_src, "COPY source of the binary")
        case.check(src.endswith(f"target/{triple}/release/{bin_name}"), f"binary COPY source is target/{triple}/release/{bin_name}")
        dest_bin = dest
    entry = next((json.loads(a) for i, a in final["ins"] if i == "ENTRYPOINT"), None)
    case.eq(entry, [dest_bin], "ENTRYPOINT is the copied binary")
    cmd = next((json.loads(a) for i, a in final["ins"] if i == "CMD"), [])
    case.eq(cmd[:1], ["serve"], "CMD serve")
    case.check("--listen" in cmd and cmd[cmd.index("--listen") + 1] == "0.0.0.0:8080", "CMD --listen 0.0.0.0:8080")
    case.check(any(i == "EXPOSE" and a.split()[0].split("/")[0] == "8080" for i, a in final["ins"]), "EXPOSE 8080")
    user = next((a for i, a in reversed(final["ins"]) if i == "USER"), None)
    case.check(user is not None and re.match(r"^[1-9]\d*(:\d+)?$", user) is not None, f"numeric non-root USER, got {user}")

    # Files copied from the build context exist and are not excluded by .dockerignore.
    config_copies: list[tuple[str, str]] = []
    context_copies = [a for st in stages for i, a in st["ins"] if i == "COPY" and not a.startswith("--from=")]
    config_dest = None
    for a in context_copies:
        parts = [p for p in a.split() if not p.startswith("--")]
        for src in parts[:-1]:
            case.check((ROOT / src).exists(), f"COPY source {src} exists in the repository")
            files = [src] if (ROOT / src).is_file() else [str(p.relative_to(ROOT)) for p in (ROOT / src).rglob("*") if p.is_file()]
            for f in files:
                case.check(dockerignore_included(f, ignore), f"{f} (COPY {src}) is excluded by .dockerignore")
            # The configuration file the image carries (config/profiles/ is compiled in).
            if src.startswith("config/") and (ROOT / src).is_file():
                config_dest = parts[-1]
                config_copies.append((src, config_dest))
                sidecar_check_config(case, binary, (ROOT / src).read_text(), src)
    case.check(config_dest is not None and "--config" in cmd and cmd[cmd.index("--config") + 1] == config_dest,
               f"CMD --config names the copied configuration ({config_dest})")
    case.eq(config_dest, f"{CONFIG_DIR}/sidecar.yaml", "configuration path (the chart mounts its ConfigMap there)")

    # Everything cargo reads is in the context: sources of every member the image build
    # compiles or resolves (not the demo host's), and include_str! files.
    for m in members:
        if os.path.normpath(m) in demo_only.values():
            continue
        base = ROOT if m == "." else ROOT / m
        for p in (base / "src").rglob("*.rs"):
            rel = str(p.relative_to(ROOT))
            case.check(dockerignore_included(rel, ignore), f"{rel} is excluded from the build context")
            for inc in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"', p.read_text()):
                target = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
                case.check(dockerignore_included(target, ignore), f"{rel} includes {target}, excluded from the build context")
                # ...and copied into the build stage, or cargo cannot find it there.
                copied = [p for a in context_copies for p in [q for q in a.split() if not q.startswith("--")][:-1]]
                case.check(any(target == c or target.startswith(c.rstrip("/") + "/") for c in copied),
                           f"{rel} includes {target}, which no COPY in the Dockerfile brings in")
    for excluded in ("target/x", ".git/HEAD", "node_modules/x", ".tools/x", "tests/it/main.rs"):
        case.check(not dockerignore_included(excluded, ignore), f".dockerignore lets {excluded} into the context")
    summary = f"--bin {bin_name} --locked --target {triple}, COPY {want_src} -> {dest_bin}, context per .dockerignore complete"

    # The image's size, measured from the release build CI made (scripts/bench), when present.
    static_bin = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / (triple or "?") / "release" / (bin_name or "?")
    if final["image"] == "scratch" and static_bin.is_file():
        case.check(elf_is_static(static_bin), f"{static_bin} is statically linked (no program interpreter): scratch has no loader")
        # Built as the image is (scripts/bench): none of the demo host's code or keys inside.
        blob = static_bin.read_bytes()
        for path in demo_only.values():
            lib = ROOT / path / "src" / "lib.rs"
            marks = ["openwop_devhost", "urn:devhost:"]
            marks += re.findall(r'TenantKey::new\(\s*"([^"]+)"', lib.read_text()) if lib.is_file() else []
            for mark in marks:
                case.check(mark.encode() not in blob, f"{static_bin} contains {mark!r}: the demo host is in the image build")
        layers = [(static_bin, dest_bin)] + [((ROOT / p), d) for p, d in config_copies]
        size = image_size(layers)
        case.check(size["compressed"] <= IMAGE_LIMIT, f"image is {size['compressed']} bytes compressed, over {IMAGE_LIMIT}")
        summary += (f"; image {size['compressed'] / 1e6:.1f} MB compressed, {size['unpacked'] / 1e6:.1f} MB unpacked "
                    f"({len(layers)} layers over scratch)")
    else:
        case.notes.append(f"no release build at {static_bin} (scripts/bench makes it): image size not measured")
    case.summary = summary
    return case


# The image budget (docs/packaging.md, "Image size"), compressed as a registry stores it.
IMAGE_LIMIT = 25 * 1000 * 1000


def elf_is_static(path: Path) -> bool:
    """True when the ELF executable has no PT_INTERP program header (no dynamic loader)."""
    import struct
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))


def image_size(layers: list[tuple[Path, str]]) -> dict:
    """Sizes of the image a container engine builds from the Dockerfile's final stage over
    `scratch`: one layer per COPY, each a tar of the destination path (parent directories
    included, root-owned, as BuildKit writes them) compressed with gzip at the default level 6
    that registries store. `compressed` is what a pull downloads (manifest and config, under
    2 kB, not counted); `unpacked` the layer tars' size on disk."""
    import gzip
    import io
    import tarfile
    out = {"compressed": 0, "unpacked": 0}
    for src, dest in layers:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            parts = dest.strip("/").split("/")
            for i in range(1, len(parts)):
                d = tarfile.TarInfo("/".join(parts[:i]) + "/")
                d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, 0
                tar.addfile(d)
            info = tar.gettarinfo(str(src), arcname="/".join(parts))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(src, "rb") as f:
                tar.addfile(info, f)
        raw = buf.getvalue()
        out["unpacked"] += len(raw)
        out["compressed"] += len(gzip.compress(raw, compresslevel=6, mtime=0))
    return out


# ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kube-version", default="1.33.0", help="Kubernetes schema version (kubernetes-validate)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print notes")
    ap.add_argument("--render-defaults", action="store_true",
                    help="only render the chart with its default values and print the manifests as a JSON "
                         "array (tests/it/replicas reads the shutdown timing and probes from it)")
    opts = ap.parse_args()

    if opts.render_defaults:
        import helm_python as helm

        with helm.Chart.load(str(CHART)) as chart:
            rendered = chart.render({}, name=RELEASE, namespace=NAMESPACE, is_install=True)
        json.dump([doc for _, doc in parse_manifests(rendered)], sys.stdout)
        return 0

    binary = find_sidecar_bin()
    cases = [("chart defaults", None)] + [
        (f.name, f) for f in sorted((CHART / "ci").glob("*-values.yaml"))
    ]
    runs = [(n, lambda n=n, f=f: chart_case(n, f, opts.kube_version, binary)) for n, f in cases]
    runs += [
        ("example host chart (native sidecar)", lambda: example_host_case(True, opts.kube_version, binary)),
        ("example host chart (classic container)", lambda: example_host_case(False, opts.kube_version)),
        ("refusals of bad values", refusals_case),
        ("chart vs sources", drift_case),
        ("Dockerfile", lambda: dockerfile_case(binary)),
    ]

    if binary is None:
        print("note: no built openwop-mcp-sidecar found (SIDECAR_BIN, $CARGO_TARGET_DIR or target/{debug,release}); "
              "rendered configurations are not passed through check-config")
    else:
        print(f"note: rendered configurations are checked with {binary} check-config, and served by it "
              "in front of the demo host with the deployment's Host names")

    passed = failed = 0
    for name, run in runs:
        t0 = time.monotonic()
        try:
            case = run()
        except Exception as e:  # a crash in one case is that case's failure, not the run's
            case = Case(name)
            case.errors.append(f"{type(e).__name__}: {e}")
            case.summary = "crashed"
        dt = time.monotonic() - t0
        if case.errors:
            failed += 1
            print(f"FAIL  {case.name}: {len(case.errors)} of {case.count} checks failed ({dt:.1f}s)")
            for e in case.errors:
                print(f"        - {e}")
        else:
            passed += 1
            print(f"PASS  {case.name}: {case.count} checks; {case.summary} ({dt:.1f}s)")
        for n in case.notes if (opts.verbose or case.errors) else sorted(set(case.notes)):
            print(f"        note: {n}")
    if _devhost is not None:
        _devhost.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
